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
 * 403 otherwise, 503 when the master has none, both before the body is looked at):
 *   POST   /internal/v1/secrets/resolve → ResolvedSecrets (body ResolveSecretsInput)
 * SECRET_ROUTES below is their table.
 */
import { badRequest, JsonClient } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from './egress.ts';
import { answers, call, type BodyOf, type RouteTable } from './route-table.ts';
import { clusterHeaders } from './cluster-token.ts';

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

// ---- the routes' schemas: a refusal is a 400 naming the field, and never quotes a value ----

/** The value's byte size and its Unicode are the master's check (checkSecretValue). */
const secretValue = { type: 'string', minLength: SECRET_LIMITS.valueMinBytes } as const;

/** String values by string keys; null or absent: none. Byte sizes are the master's check (checkSecretMetadata). */
const metadata = {
  type: ['object', 'null'],
  additionalProperties: { type: 'string' },
  maxProperties: SECRET_LIMITS.metadataMaxEntries,
} as const;

const NewSecretBody = {
  type: 'object',
  required: ['name', 'value'],
  properties: { name: { type: 'string', pattern: SECRET_LIMITS.namePattern.source }, value: secretValue, metadata },
  additionalProperties: false,
} as const;

const SecretUpdateBody = {
  type: 'object',
  required: ['value'],
  properties: { value: secretValue, metadata },
  additionalProperties: false,
} as const;

/** Names are kept as asked: a name no secret can have is reported missing, not refused. */
const ResolveSecretsBody = {
  type: 'object',
  required: ['teamId', 'names'],
  properties: {
    teamId: { type: 'string', minLength: 1 },
    names: { type: 'array', items: { type: 'string' }, maxItems: SECRET_LIMITS.resolveMaxNames },
  },
  additionalProperties: false,
} as const;

/** As E2B's list takes them: a limit of up to 4 digits (empty: the default; its range is the master's check), the token a page gave. */
const ListSecretsQuery = {
  type: 'object',
  properties: { limit: { type: 'string', pattern: '^[0-9]{0,4}$' }, nextToken: { type: 'string' } },
} as const;

/** The master's vault routes (route-table.ts). A wildcard, not `:secretID`: the router caps a parameter at 100 characters, and a name may have 128. */
export const SECRET_ROUTES = {
  list: { method: 'GET', path: '/secrets', query: ListSecretsQuery, answer: answers<WireSecret[]>() },
  create: { method: 'POST', path: '/secrets', body: NewSecretBody, answer: answers<WireSecret>() },
  get: { method: 'GET', path: '/secrets/*', answer: answers<WireSecret>() },
  update: { method: 'POST', path: '/secrets/*', body: SecretUpdateBody, answer: answers<WireSecret>() },
  delete: { method: 'DELETE', path: '/secrets/*', answer: answers<void>() },
  resolve: { method: 'POST', path: '/internal/v1/secrets/resolve', body: ResolveSecretsBody, answer: answers<ResolvedSecrets>() },
} as const satisfies RouteTable;

// ---- what the schemas cannot say (the master answers these errors as 400) ----

const LONE_SURROGATE = /\p{Cs}/u;

/** A name (past the schema's pattern) in its stored, lower-case form. */
function checkSecretName(v: string): string {
  const name = v.toLowerCase();
  if (name.startsWith(SECRET_LIMITS.reservedNamePrefix)) throw badRequest(`name cannot start with "${SECRET_LIMITS.reservedNamePrefix}": that prefix is reserved for secret ids`);
  return name;
}

/** The errors never quote the value. */
function checkSecretValue(v: string): string {
  const bytes = Buffer.byteLength(v, 'utf8');
  if (bytes > SECRET_LIMITS.valueMaxBytes) throw badRequest(`value is ${bytes} bytes; at most ${SECRET_LIMITS.valueMaxBytes} bytes (UTF-8) are allowed`);
  // A lone surrogate would be stored as U+FFFD: the value read back would differ from the one given.
  if (LONE_SURROGATE.test(v)) throw badRequest('value is not valid Unicode (it holds a lone surrogate)');
  return v;
}

/** SDKs that omit an unset field may also send it as null: both mean "not given". */
function checkSecretMetadata(v: SecretMetadata | null | undefined): SecretMetadata | undefined {
  if (v === undefined || v === null) return undefined;
  const entries = Object.entries(v);
  let total = 0;
  for (const [key, value] of entries) {
    const keyBytes = Buffer.byteLength(key, 'utf8');
    if (keyBytes === 0) throw badRequest('metadata keys must not be empty');
    if (keyBytes > SECRET_LIMITS.metadataKeyMaxBytes) throw badRequest(`metadata key ${JSON.stringify(key.slice(0, 40))}… is ${keyBytes} bytes; at most ${SECRET_LIMITS.metadataKeyMaxBytes} are allowed`);
    const valueBytes = Buffer.byteLength(value, 'utf8');
    if (valueBytes > SECRET_LIMITS.metadataValueMaxBytes) throw badRequest(`metadata.${key} is ${valueBytes} bytes; at most ${SECRET_LIMITS.metadataValueMaxBytes} are allowed`);
    total += keyBytes + valueBytes;
  }
  if (total > SECRET_LIMITS.metadataMaxBytes) throw badRequest(`metadata is ${total} bytes in all (keys and values); at most ${SECRET_LIMITS.metadataMaxBytes} are allowed`);
  // fromEntries defines own properties: a key "__proto__" stays a key, never a prototype.
  return Object.fromEntries(entries) as SecretMetadata;
}

/** POST /secrets's body, past its schema. */
export function checkNewSecret(b: BodyOf<typeof SECRET_ROUTES.create>): NewSecretInput {
  const metadata = checkSecretMetadata(b.metadata);
  return { name: checkSecretName(b.name), value: checkSecretValue(b.value), ...(metadata ? { metadata } : {}) };
}

/** POST /secrets/:secretID's body, past its schema. */
export function checkSecretUpdate(b: BodyOf<typeof SECRET_ROUTES.update>): SecretUpdateInput {
  const metadata = checkSecretMetadata(b.metadata);
  return { value: checkSecretValue(b.value), ...(metadata ? { metadata } : {}) };
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
  /** clusterToken: cluster_token (cluster-token.ts), which the master takes on every route. */
  constructor(masterUrl: string, adminToken: string, opts: { timeoutMs?: number; clusterToken?: string } = {}) {
    this.http = new JsonClient(masterUrl, { timeoutMs: opts.timeoutMs ?? 5_000, headers: { ...clusterHeaders(opts.clusterToken), ...(adminToken ? { [EGRESS_ADMIN_TOKEN_HEADER]: adminToken } : {}) } });
  }

  async resolve(teamId: string, names: string[]): Promise<ResolvedSecrets> {
    const answer = await call(this.http, SECRET_ROUTES.resolve, {}, { body: { teamId, names } satisfies ResolveSecretsInput });
    // Without a prototype, values['constructor'] or values['toString'] is undefined, not Object's.
    const values: Record<string, string> = Object.assign(Object.create(null), answer.values);
    return { values, missing: answer.missing };
  }
}
