import type { Kysely } from 'kysely';
import type { Logger } from '@svc/common';
import type { Database } from '../db/schema.ts';
import type { Sealer } from '../vault/vault.ts';

/** A signing key as kept between restarts and shared by the masters. Times are epoch milliseconds. */
export interface StoredSigningKey {
  /** RFC 7638 thumbprint of the public key. */
  kid: string;
  /** PKCS#8 PEM. */
  privateKeyPem: string;
  createdAt: number;
  /** It signs from this time until a newer key's activeFrom. */
  activeFrom: number;
}

/** Where the workload identity signing keys live; every master sharing one agrees on the keys. */
export interface SigningKeyStore {
  list(): Promise<StoredSigningKey[]>;
  add(key: StoredSigningKey): Promise<void>;
  /** Removing a key that is already gone (another master removed it) is not an error. */
  remove(kid: string): Promise<void>;
}

/** For tests and single-process setups: the keys live as long as the object. */
export class MemorySigningKeyStore implements SigningKeyStore {
  private readonly keys = new Map<string, StoredSigningKey>();

  async list(): Promise<StoredSigningKey[]> {
    return [...this.keys.values()].map((k) => ({ ...k }));
  }

  async add(key: StoredSigningKey): Promise<void> {
    if (this.keys.has(key.kid)) throw new Error(`signing key ${key.kid} is already stored`);
    this.keys.set(key.kid, { ...key });
  }

  async remove(kid: string): Promise<void> {
    this.keys.delete(kid);
  }
}

/**
 * t_svc_identity_key, the private keys sealed by the vault with their kid as context. A key the
 * vault cannot open (sealed under a vault key dropped from the key file) is left out of the set,
 * and logged once: the issuer then signs with another, or makes a new one when none is left,
 * instead of failing the master's start. Its row stays, for its vault key to come back.
 */
export class DbSigningKeyStore implements SigningKeyStore {
  private readonly unopened = new Set<string>();

  constructor(private readonly db: Kysely<Database>, private readonly sealer: Sealer, private readonly logger?: Logger) {}

  async list(): Promise<StoredSigningKey[]> {
    const rows = await this.db.selectFrom('t_svc_identity_key').selectAll().execute();
    return rows.flatMap((r) => {
      let privateKeyPem: string;
      try {
        privateKeyPem = this.sealer.open(r.private_key_sealed, r.kid);
      } catch (err) {
        // Once per key and process: the store is read every minute (rotateIfDue).
        if (!this.unopened.has(r.kid)) this.logger?.error({ kid: r.kid, err: (err as Error).message }, 'a workload identity signing key cannot be opened with the vault key file: left out of the issuer\'s keys (tokens it signed no longer verify)');
        this.unopened.add(r.kid);
        return [];
      }
      return [{ kid: r.kid, privateKeyPem, createdAt: Number(r.created_at), activeFrom: Number(r.active_from) }];
    });
  }

  async add(key: StoredSigningKey): Promise<void> {
    await this.db.insertInto('t_svc_identity_key').values({
      kid: key.kid,
      private_key_sealed: this.sealer.seal(key.privateKeyPem, key.kid),
      created_at: key.createdAt,
      active_from: key.activeFrom,
    }).execute();
  }

  async remove(kid: string): Promise<void> {
    await this.db.deleteFrom('t_svc_identity_key').where('kid', '=', kid).execute();
  }
}
