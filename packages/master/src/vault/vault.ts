import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Seals values for storage (secret values, signing keys): AES-256-GCM under a key from the vault
 * key file (docs/security.md "The vault key"). `context` is bound into the seal as additional
 * data, so a sealed value copied to another row (another secret, another version) does not open.
 */
export interface Sealer {
  seal(plain: string, context: string): string;
  open(sealed: string, context: string): string;
}

/** The key file: keys by id, and which one seals. Older keys stay to open what they sealed. */
export interface VaultKeyFile {
  primary: string;
  keys: Record<string, string>;
}

const FORMAT = 'v1';
/** AES-GCM's full tag, the only length seal() writes and open() takes. */
const TAG_BYTES = 16;
const KEY_ID_PATTERN = /^[a-zA-Z0-9_-]{1,32}$/;

class VaultError extends Error {}

export class Vault implements Sealer {
  private readonly keys = new Map<string, Buffer>();
  readonly primary: string;

  constructor(file: VaultKeyFile) {
    if (!file || typeof file !== 'object' || typeof file.keys !== 'object' || !file.keys) throw new VaultError('the vault key file must hold {"primary": id, "keys": {id: base64 of 32 bytes}}');
    for (const [id, b64] of Object.entries(file.keys)) {
      if (!KEY_ID_PATTERN.test(id)) throw new VaultError(`vault key id ${JSON.stringify(id)} must match ${KEY_ID_PATTERN}`);
      const key = typeof b64 === 'string' ? Buffer.from(b64, 'base64') : Buffer.alloc(0);
      if (key.length !== 32) throw new VaultError(`vault key ${id} must be 32 bytes in base64`);
      this.keys.set(id, key);
    }
    if (!this.keys.has(file.primary)) throw new VaultError(`the vault's primary key ${JSON.stringify(file.primary)} is not among its keys`);
    this.primary = file.primary;
  }

  seal(plain: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.primary)!, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(context));
    const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return [FORMAT, this.primary, iv.toString('base64'), cipher.getAuthTag().toString('base64'), ct.toString('base64')].join(':');
  }

  open(sealed: string, context: string): string {
    const [format, keyId, iv, tag, ct] = sealed.split(':');
    if (format !== FORMAT || !keyId || iv === undefined || tag === undefined || ct === undefined) throw new VaultError('not a sealed value');
    const key = this.keys.get(keyId);
    if (!key) throw new VaultError(`sealed under vault key ${keyId}, which the key file no longer holds`);
    // GCM verifies a tag cut short, down to 4 bytes, against the full one's first bytes: without
    // the length fixed, a forger had 2^32 tries, not 2^128.
    const tagBytes = Buffer.from(tag, 'base64');
    if (tagBytes.length !== TAG_BYTES) throw new VaultError(`a sealed value failed its integrity check (its tag is ${tagBytes.length} bytes, not ${TAG_BYTES})`);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'), { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(tagBytes);
    try {
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64')), decipher.final()]).toString('utf8');
    } catch {
      throw new VaultError('a sealed value failed its integrity check (wrong key, or moved to another record)');
    }
  }

  /** Whether a sealed value is under an older key than the primary (docs/security.md, rotation). */
  isStale(sealed: string): boolean {
    return sealed.split(':')[1] !== this.primary;
  }
}

/** A fresh key file's content: one key, primary. */
export function newVaultKeyFile(id = `k${Date.now().toString(36)}`): VaultKeyFile {
  return { primary: id, keys: { [id]: randomBytes(32).toString('base64') } };
}

/**
 * Reads the vault key file; with `create`, writes a new one (mode 0600) when there is none.
 * A file that others can read is refused: it opens every secret.
 */
export function loadVaultKeyFile(path: string, opts: { create?: boolean } = {}): Vault {
  if (!existsSync(path)) {
    if (!opts.create) throw new VaultError(`the vault key file ${path} does not exist`);
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    writeFileSync(path, JSON.stringify(newVaultKeyFile(), null, 2) + '\n', { mode: 0o600, flag: 'wx' });
    chmodSync(path, 0o600);
  }
  const mode = statSync(path).mode & 0o777;
  if (mode & 0o077) throw new VaultError(`the vault key file ${path} has mode ${mode.toString(8)}: it must be readable by its owner alone (chmod 600)`);
  let parsed: VaultKeyFile;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8')) as VaultKeyFile;
  } catch (err) {
    throw new VaultError(`the vault key file ${path} is not JSON: ${(err as Error).message}`);
  }
  return new Vault(parsed);
}
