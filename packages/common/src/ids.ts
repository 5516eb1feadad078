import { randomBytes, randomUUID } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** Lowercase alphanumerics, safe in a DNS label (`<port>-<id>.<domain>`). */
export function randomId(len: number): string {
  const bytes = randomBytes(len);
  let s = '';
  for (let i = 0; i < len; i++) s += ALPHABET[bytes[i] % ALPHABET.length];
  return s;
}

export const newSandboxId = () => 'i' + randomId(19);
export const newTemplateId = () => 'tpl-' + randomId(16);
export const newJobId = () => randomUUID();
export const newArtifactId = () => 'art-' + randomId(16);
export const newToken = () => randomBytes(24).toString('base64url');
export const newUuid = () => randomUUID();
