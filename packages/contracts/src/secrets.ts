/**
 * The secrets vault's contract: E2B's `/secrets` wire shape and limits, the placeholder grammar
 * the master and the egress proxy share, and the proxy's call to the master for values.
 *
 * E2B's routes, served by the master (the API gateway forwards them unchanged, with TEAM_HEADER):
 *   GET    /secrets?limit&nextToken   → WireSecret[]   (X-Next-Token header while more remain)
 *   POST   /secrets                   → 201 WireSecret (body NewSecretInput) | 409 name taken
 *   GET    /secrets/:secretID         → WireSecret | 404 (secretID: the id, or the name)
 *   POST   /secrets/:secretID         → WireSecret | 404 (body SecretUpdateInput: appends a version)
 *   DELETE /secrets/:secretID         → 204 | 404       (the secret and every version)
 * No answer carries a value. A secret of another team answers 404 like a missing one.
 *
 * The egress proxy's route (header EGRESS_ADMIN_TOKEN_HEADER equal to egress.admin_token;
 * 403 otherwise, 503 when the master has none):
 *   POST   /internal/v1/secrets/resolve → ResolvedSecrets (body ResolveSecretsInput)
 */
import { badRequest, JsonClient } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from './egress.ts';

/** E2B's documented limits (its openapi, NewSecret and SecretMetadata). */
export const SECRET_LIMITS = {
  nameMaxChars: 128,
  /** Names are lower-cased before storage; the pattern is checked before that. */
  namePattern: /^[a-zA-Z0-9_.-]{1,128}$/,
  /** Reserved for ids, so that `/secrets/:secretID` is never ambiguous; checked case-insensitively. */
  reservedNamePrefix: 'sec_',
  valueMinBytes: 1,
  valueMaxBytes: 64 * 1024,
  metadataMaxEntries: 32,
  metadataKeyMaxBytes: 128,
  metadataValueMaxBytes: 1024,
  /** Keys and values together, in UTF-8 bytes. */
  metadataMaxBytes: 8192,
  listDefaultLimit: 100,
  listMaxLimit: 100,
  /** Names in one resolve call. */
  resolveMaxNames: 64,
} as const;

export const SECRET_ID_PATTERN = /^sec_[a-z0-9]{24}$/;
export const SECRETS_RESOLVE_PATH = '/internal/v1/secrets/resolve';

export type SecretMetadata = Record<string, string>;

/** E2B's `Secret`: a secret's metadata, never its value. Times are ISO 8601. */
export interface WireSecret {
  secretID: string;
  name: string;
  currentVersion: number;
  metadata: SecretMetadata;
  createdAt: string;
  updatedAt: string;
}

/** E2B's `NewSecret`. */
export interface NewSecretInput {
  name: string;
  value: string;
  metadata?: SecretMetadata;
}

/** E2B's `SecretUpdate`: metadata, when given, replaces the old. */
export interface SecretUpdateInput {
  value: string;
  metadata?: SecretMetadata;
}

export interface ResolveSecretsInput {
  teamId: string;
  names: string[];
}

/** Values by the names as asked (not lower-cased); names the team has no secret of are missing. */
export interface ResolvedSecrets {
  values: Record<string, string>;
  missing: string[];
}

export function isSecretId(ref: string): boolean {
  return SECRET_ID_PATTERN.test(ref);
}

// ---- checks (the master answers their errors as 400) ----

const LONE_SURROGATE = /\p{Cs}/u;

/** A valid name in its stored (lower-case) form. */
export function checkSecretName(v: unknown): string {
  if (typeof v !== 'string') throw badRequest('name must be a string');
  if (!SECRET_LIMITS.namePattern.test(v)) {
    throw badRequest(`name must be 1 to ${SECRET_LIMITS.nameMaxChars} characters of letters, digits, '_', '.' and '-' (got ${JSON.stringify(v.slice(0, 200))})`);
  }
  const name = v.toLowerCase();
  if (name.startsWith(SECRET_LIMITS.reservedNamePrefix)) throw badRequest(`name cannot start with "${SECRET_LIMITS.reservedNamePrefix}": that prefix is reserved for secret ids`);
  return name;
}

/** The errors never quote the value. */
export function checkSecretValue(v: unknown): string {
  if (typeof v !== 'string') throw badRequest('value must be a string');
  const bytes = Buffer.byteLength(v, 'utf8');
  if (bytes < SECRET_LIMITS.valueMinBytes) throw badRequest('value must not be empty');
  if (bytes > SECRET_LIMITS.valueMaxBytes) throw badRequest(`value is ${bytes} bytes; at most ${SECRET_LIMITS.valueMaxBytes} bytes (UTF-8) are allowed`);
  // A lone surrogate would be stored as U+FFFD: the value read back would differ from the one given.
  if (LONE_SURROGATE.test(v)) throw badRequest('value is not valid Unicode (it holds a lone surrogate)');
  return v;
}

export function checkSecretMetadata(v: unknown): SecretMetadata {
  if (!isPlainObject(v)) throw badRequest('metadata must be an object of string keys to string values');
  const entries = Object.entries(v);
  if (entries.length > SECRET_LIMITS.metadataMaxEntries) throw badRequest(`metadata has ${entries.length} entries; at most ${SECRET_LIMITS.metadataMaxEntries} are allowed`);
  let total = 0;
  for (const [key, value] of entries) {
    const keyBytes = Buffer.byteLength(key, 'utf8');
    if (keyBytes === 0) throw badRequest('metadata keys must not be empty');
    if (keyBytes > SECRET_LIMITS.metadataKeyMaxBytes) throw badRequest(`metadata key ${JSON.stringify(key.slice(0, 40))}… is ${keyBytes} bytes; at most ${SECRET_LIMITS.metadataKeyMaxBytes} are allowed`);
    if (typeof value !== 'string') throw badRequest(`metadata.${key} must be a string`);
    const valueBytes = Buffer.byteLength(value, 'utf8');
    if (valueBytes > SECRET_LIMITS.metadataValueMaxBytes) throw badRequest(`metadata.${key} is ${valueBytes} bytes; at most ${SECRET_LIMITS.metadataValueMaxBytes} are allowed`);
    total += keyBytes + valueBytes;
  }
  if (total > SECRET_LIMITS.metadataMaxBytes) throw badRequest(`metadata is ${total} bytes in all (keys and values); at most ${SECRET_LIMITS.metadataMaxBytes} are allowed`);
  // fromEntries defines own properties: a key "__proto__" stays a key, never a prototype.
  return Object.fromEntries(entries) as SecretMetadata;
}

/** POST /secrets's body. */
export function checkNewSecret(body: unknown): NewSecretInput {
  const b = checkBodyFields(body, ['name', 'value', 'metadata']);
  const metadata = optionalMetadata(b.metadata);
  return { name: checkSecretName(b.name), value: checkSecretValue(b.value), ...(metadata ? { metadata } : {}) };
}

/** POST /secrets/:secretID's body. */
export function checkSecretUpdate(body: unknown): SecretUpdateInput {
  const b = checkBodyFields(body, ['value', 'metadata']);
  const metadata = optionalMetadata(b.metadata);
  return { value: checkSecretValue(b.value), ...(metadata ? { metadata } : {}) };
}

/** The resolve route's body. Names are kept as asked: a name no secret can have is reported missing, not refused. */
export function checkResolveInput(body: unknown): ResolveSecretsInput {
  const b = checkBodyFields(body, ['teamId', 'names']);
  if (typeof b.teamId !== 'string' || !b.teamId) throw badRequest('teamId must be a non-empty string');
  if (!Array.isArray(b.names) || !b.names.every((n) => typeof n === 'string')) throw badRequest('names must be a list of strings');
  if (b.names.length > SECRET_LIMITS.resolveMaxNames) throw badRequest(`names holds ${b.names.length} names; at most ${SECRET_LIMITS.resolveMaxNames} per call`);
  return { teamId: b.teamId, names: b.names as string[] };
}

/** SDKs that omit an unset field may also send it as null: both mean "not given". */
function optionalMetadata(v: unknown): SecretMetadata | undefined {
  return v === undefined || v === null ? undefined : checkSecretMetadata(v);
}

function checkBodyFields(body: unknown, known: string[]): Record<string, unknown> {
  if (!isPlainObject(body)) throw badRequest(`the request body must be a JSON object with ${known.join(', ')}`);
  const extra = Object.keys(body).filter((k) => !known.includes(k));
  if (extra.length) throw badRequest(`unknown fields ${extra.map((k) => JSON.stringify(k.slice(0, 64))).join(', ')} (known: ${known.join(', ')})`);
  return body;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---- placeholders (the grammar of E2B's SDK: Secret.fill, iam tokens) ----

const SECRET_PREFIX = '${e2b.secrets.';
const TOKEN_PREFIX = '${e2b.identity.tokens.';

interface Placeholder {
  kind: 'secret' | 'token';
  name: string;
  start: number;
  /** Just past the closing `}`. */
  end: number;
}

/**
 * The placeholders in text, left to right. NAME is everything between the prefix and the next
 * `}` (as the SDK documents it); a prefix with no `}` after it, or with an empty name, is text.
 */
function* placeholders(text: string): Generator<Placeholder> {
  let from = 0;
  for (;;) {
    const start = text.indexOf('${', from);
    if (start === -1) return;
    const kind = text.startsWith(SECRET_PREFIX, start) ? 'secret' : text.startsWith(TOKEN_PREFIX, start) ? 'token' : undefined;
    if (kind) {
      const nameStart = start + (kind === 'secret' ? SECRET_PREFIX : TOKEN_PREFIX).length;
      const close = text.indexOf('}', nameStart);
      if (close > nameStart) {
        yield { kind, name: text.slice(nameStart, close), start, end: close + 1 };
        from = close + 1;
        continue;
      }
    }
    from = start + 2;
  }
}

/** The secret and token names text refers to, each once, in order of first appearance. */
export function placeholderRefs(text: string): { secrets: string[]; tokens: string[] } {
  const secrets = new Set<string>();
  const tokens = new Set<string>();
  for (const p of placeholders(text)) (p.kind === 'secret' ? secrets : tokens).add(p.name);
  return { secrets: [...secrets], tokens: [...tokens] };
}

/**
 * Text with every placeholder replaced by what `lookup` gives for it (a lookup that cannot
 * answer throws). Substituted values are not scanned again: a value that holds a placeholder
 * stays as it is.
 */
export function fillPlaceholders(text: string, lookup: { secret(name: string): string; token(name: string): string }): string {
  let out = '';
  let copied = 0;
  for (const p of placeholders(text)) {
    out += text.slice(copied, p.start) + (p.kind === 'secret' ? lookup.secret(p.name) : lookup.token(p.name));
    copied = p.end;
  }
  return out + text.slice(copied);
}

// ---- the egress proxy's client ----

/** The egress proxy's view of the vault: a team's current values for the names a request refers to. */
export class SecretResolverClient {
  private readonly http: JsonClient;
  constructor(masterUrl: string, adminToken: string, timeoutMs = 5_000) {
    this.http = new JsonClient(masterUrl, { timeoutMs, headers: adminToken ? { [EGRESS_ADMIN_TOKEN_HEADER]: adminToken } : {} });
  }

  async resolve(teamId: string, names: string[]): Promise<ResolvedSecrets> {
    const answer = await this.http.post<ResolvedSecrets>(SECRETS_RESOLVE_PATH, { teamId, names } satisfies ResolveSecretsInput);
    // Without a prototype, values['constructor'] or values['toString'] is undefined, not Object's.
    const values: Record<string, string> = Object.assign(Object.create(null), answer.values);
    return { values, missing: answer.missing };
  }
}
