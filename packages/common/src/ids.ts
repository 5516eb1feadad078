import { randomBytes, randomUUID } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** Lowercase alphanumerics, safe in a DNS label (`<port>-<id>.<domain>`). */
export function randomId(len: number): string {
  const bytes = randomBytes(len);
  let s = '';
  for (let i = 0; i < len; i++) s += ALPHABET[bytes[i] % ALPHABET.length];
  return s;
}

/** A sandbox id is `i` and 19 of ALPHABET: newSandboxId makes them, isIssuedSandboxId knows them. */
const SANDBOX_ID_LENGTH = 20;

export const newSandboxId = () => 'i' + randomId(SANDBOX_ID_LENGTH - 1);

/**
 * Whether id has the form newSandboxId issues (ids.test.ts keeps the two the same). Case-sensitive:
 * a caller matching ids without case lower-cases first. The data-plane proxy asks this per
 * request, so it is a char-code loop that allocates nothing.
 */
export function isIssuedSandboxId(id: string): boolean {
  if (id.length !== SANDBOX_ID_LENGTH || id.charCodeAt(0) !== 105 /* i */) return false;
  for (let i = 1; i < SANDBOX_ID_LENGTH; i++) {
    const c = id.charCodeAt(i);
    if (!((c >= 97 && c <= 122) || (c >= 48 && c <= 57))) return false; // ALPHABET: a-z, 0-9
  }
  return true;
}

export const newTemplateId = () => 'tpl-' + randomId(16);
export const newJobId = () => randomUUID();
export const newArtifactId = () => 'art-' + randomId(16);
export const newToken = () => randomBytes(24).toString('base64url');
export const newUuid = () => randomUUID();
