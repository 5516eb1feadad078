import { badRequest, conflict, notFound, randomId } from '@svc/common';
import {
  isSecretId, SECRET_LIMITS,
  type NewSecretInput, type ResolvedSecrets, type SecretMetadata, type SecretUpdateInput, type WireSecret,
} from '@svc/contracts/secrets';
import type { Sealer } from '../vault/vault.ts';
import type { SecretDbRow, SecretRepo } from './repo.ts';

export interface SecretPage {
  secrets: WireSecret[];
  /** Set while more remain: the X-Next-Token of E2B's list. */
  nextToken?: string;
}

const newSecretId = () => 'sec_' + randomId(24);

/** A version's seal opens only in its own row: the context names the secret and the version. */
export const sealContext = (secretId: string, version: number) => `${secretId}:${version}`;

/**
 * The secrets vault: a team's named values, kept sealed, read back only by the egress proxy
 * (resolve). Every call names its team; a secret of another team is not found, never forbidden,
 * so ids and names of other teams do not leak. Inputs are checked by the routes
 * (@svc/contracts/secrets); no value is ever logged or put in an error.
 */
export class SecretService {
  constructor(
    private readonly repo: SecretRepo,
    private readonly sealer: Sealer,
    private readonly now: () => number = Date.now,
  ) {}

  async create(teamId: string, input: NewSecretInput): Promise<WireSecret> {
    const secretId = newSecretId();
    const at = this.now();
    const row = {
      secret_id: secretId, team_id: teamId, name: input.name, metadata: JSON.stringify(input.metadata ?? {}),
      current_version: 1, created_at: at, updated_at: at,
    };
    const first = { secret_id: secretId, version: 1, sealed_value: this.sealer.seal(input.value, sealContext(secretId, 1)), created_at: at };
    if (!(await this.repo.insert(row, first))) throw conflict(`a secret named ${JSON.stringify(input.name)} already exists`);
    return toWire(row);
  }

  /** `ref`: the secret's id, or its name in any case. */
  async get(teamId: string, ref: string): Promise<WireSecret> {
    return toWire(await this.find(teamId, ref));
  }

  async update(teamId: string, ref: string, input: SecretUpdateInput): Promise<WireSecret> {
    const { secret_id: secretId } = await this.find(teamId, ref);
    const metadata = input.metadata === undefined ? undefined : JSON.stringify(input.metadata);
    const updated = await this.repo.appendVersion(teamId, secretId, (version) => this.sealer.seal(input.value, sealContext(secretId, version)), metadata, this.now());
    if (!updated) throw notFoundError(ref);
    return toWire(updated);
  }

  async delete(teamId: string, ref: string): Promise<void> {
    const { secret_id: secretId } = await this.find(teamId, ref);
    if (!(await this.repo.delete(teamId, secretId))) throw notFoundError(ref);
  }

  /** Oldest first; `limit` and `nextToken` as E2B's query gives them (text; SECRET_ROUTES.list's schema). */
  async list(teamId: string, query: { limit?: string; nextToken?: string }): Promise<SecretPage> {
    const limit = parseLimit(query.limit);
    const after = query.nextToken === undefined || query.nextToken === '' ? undefined : decodePageToken(query.nextToken);
    // One more than asked tells whether another page follows.
    const rows = await this.repo.list(teamId, { after, limit: limit + 1 });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { secrets: page.map(toWire), ...(rows.length > limit && last ? { nextToken: encodePageToken(last) } : {}) };
  }

  /**
   * The current values of a team's secrets, keyed by the names as asked (a placeholder may
   * spell a name in any case). A name the team has no secret of is missing.
   */
  async resolve(teamId: string, names: string[]): Promise<ResolvedSecrets> {
    const asked = [...new Set(names)];
    const current = await this.repo.currentSealed(teamId, storableNames(asked));
    const byName = new Map(current.map((c) => [c.name, c]));
    const values: Array<[string, string]> = [];
    const missing: string[] = [];
    for (const name of asked) {
      const found = byName.get(name.toLowerCase());
      if (found) values.push([name, this.sealer.open(found.sealedValue, sealContext(found.secretId, found.version))]);
      else missing.push(name);
    }
    // fromEntries: a secret named "__proto__" is a key like any other.
    return { values: Object.fromEntries(values), missing };
  }

  /** The names (as given) the team has no secret of: a sandbox create refers only to existing ones. */
  async missing(teamId: string, names: string[]): Promise<string[]> {
    const asked = [...new Set(names)];
    const existing = await this.repo.existingNames(teamId, storableNames(asked));
    return asked.filter((name) => !existing.has(name.toLowerCase()));
  }

  private async find(teamId: string, ref: string): Promise<SecretDbRow> {
    const row = isSecretId(ref) ? await this.repo.byId(teamId, ref) : await this.repo.byName(teamId, ref.toLowerCase());
    if (!row) throw notFoundError(ref);
    return row;
  }
}

/** Same answer for a missing secret and another team's: the caller learns nothing about the other team. */
function notFoundError(ref: string) {
  return notFound(`secret ${JSON.stringify(ref.slice(0, 200))} not found`);
}

/** Names a secret could have, lower-cased: the others need no query (and could be any length). */
function storableNames(names: string[]): string[] {
  return [...new Set(names.filter((n) => SECRET_LIMITS.namePattern.test(n)).map((n) => n.toLowerCase()))];
}

function toWire(row: SecretDbRow): WireSecret {
  return {
    secretID: row.secret_id,
    name: row.name,
    currentVersion: row.current_version,
    metadata: JSON.parse(row.metadata) as SecretMetadata,
    createdAt: new Date(Number(row.created_at)).toISOString(),
    updatedAt: new Date(Number(row.updated_at)).toISOString(),
  };
}

function parseLimit(v: string | undefined): number {
  if (v === undefined || v === '') return SECRET_LIMITS.listDefaultLimit;
  const n = /^\d{1,4}$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > SECRET_LIMITS.listMaxLimit) throw badRequest(`limit must be a whole number from 1 to ${SECRET_LIMITS.listMaxLimit}`);
  return n;
}

/** Opaque to clients: where the page ended, (created_at, secret_id). */
function encodePageToken(row: SecretDbRow): string {
  return Buffer.from(`${Number(row.created_at)}:${row.secret_id}`).toString('base64url');
}

function decodePageToken(token: string): { createdAt: number; id: string } {
  const m = /^(\d{1,15}):(sec_[a-z0-9]{24})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  if (!m) throw badRequest('nextToken is not one this server gave');
  return { createdAt: Number(m[1]), id: m[2] };
}
