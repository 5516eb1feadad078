/**
 * The JSON schemas of the master's route inputs (master-routes in master.ts and
 * master-internal.ts): what a route refuses with a 400 naming the field before its handler runs
 * (common/schema-validation.ts). The rules a schema cannot say (connect's 0, a state list's
 * words, an ISO timestamp) stay in the master's domain code.
 */

/**
 * Bounds of a create request (docs/api.md "Limits"), checked by the master before anything
 * starts. docs/api.md lists them; timeout follows E2B's openapi (int32 seconds).
 */
export const SANDBOX_LIMITS = {
  timeoutSec: 2_147_483_647,
  templateRefBytes: 256,
  metadataEntries: 256,
  metadataKeyBytes: 256,
  metadataValueBytes: 4096,
  metadataTotalBytes: 64 * 1024,
  envVarEntries: 1024,
  envVarNameBytes: 256,
  envVarValueBytes: 64 * 1024,
  envVarsTotalBytes: 512 * 1024,
  networkListEntries: 1024,
  networkEntryBytes: 256,
  networkRulesBytes: 64 * 1024,
  volumeMounts: 32,
  volumeNameChars: 128,
  mountPathBytes: 4096,
  cpuCount: 256,
  memoryMBMin: 64,
  memoryMBMax: 1024 * 1024,
} as const;

/** Seconds of an idle timeout: -1 never, 0 immediate, else that many (int32, E2B's openapi). */
const timeoutSeconds = { type: 'integer', minimum: -1, maximum: SANDBOX_LIMITS.timeoutSec } as const;

/** `memory: false` asks a pause, connect or resume for the files alone. */
const memory = { type: ['boolean', 'null'] } as const;

export const PauseBody = {
  type: 'object',
  properties: { memory },
} as const;

/** connect and resume: the timeout's meaning differs (timeouts.ts), its type does not. */
export const WakeBody = {
  type: 'object',
  properties: { timeout: { ...timeoutSeconds, type: ['integer', 'null'] }, memory },
} as const;

export const SetTimeoutBody = {
  type: 'object',
  properties: { timeout: timeoutSeconds },
  required: ['timeout'],
} as const;

export const RefreshBody = {
  type: 'object',
  properties: { duration: { type: ['integer', 'null'], minimum: 0, maximum: SANDBOX_LIMITS.timeoutSec } },
} as const;

/** Unix seconds; at most 12 digits, as a query string sends them. */
const unixSeconds = { type: 'integer', minimum: 0, maximum: 999_999_999_999 } as const;

export const MetricsQuery = {
  type: 'object',
  properties: { start: unixSeconds, end: unixSeconds },
} as const;

/** A text query parameter, given once. */
const once = { type: 'string', maxLength: 4096 } as const;

export const ListSandboxesQuerySchema = {
  type: 'object',
  properties: {
    // A repeated ?state= means the same as a comma list; the words are checked by the master.
    state: { anyOf: [once, { type: 'array', items: once, maxItems: 16 }] },
    metadata: once,
    template: once,
    limit: { type: 'integer', minimum: 1, maximum: 1000 },
    nextToken: once,
    order: { enum: ['asc', 'desc'] },
    startedAfter: once,
    startedBefore: once,
  },
} as const;

/** The most sandboxes one fork makes. */
export const MAX_FORK_COUNT = 10;

export const SnapshotBody = {
  type: 'object',
  properties: { name: { type: ['string', 'null'], maxLength: 256 } },
} as const;

export const ForkBody = {
  type: 'object',
  properties: { count: { type: 'integer', minimum: 1, maximum: MAX_FORK_COUNT }, timeout: timeoutSeconds },
} as const;

export const ListSnapshotsQuerySchema = {
  type: 'object',
  properties: { sandboxId: once, name: once, limit: { type: 'integer', minimum: 1, maximum: 1000 }, nextToken: once },
} as const;

// ----- internal routes (master-internal.ts) -----

/** The proxy's batch of sandboxes that had traffic (at most a busy node's second of ids). */
export const ActivityBody = {
  type: 'object',
  properties: { sandboxIds: { type: 'array', items: { type: 'string', maxLength: 128 }, maxItems: 100_000 } },
  required: ['sandboxIds'],
} as const;

const signedText = { type: 'string', maxLength: 4096 } as const;

/**
 * A signed file URL's fields, as the proxy read them (common/envd-signature.ts). A URL without a
 * signature matches no sandbox: a 401, as a wrong one.
 */
export const SignedFileRequestBody = {
  type: 'object',
  properties: {
    path: signedText,
    operation: { enum: ['read', 'write'] },
    username: signedText,
    signature: signedText,
    expiration: signedText,
  },
  required: ['path', 'operation'],
} as const;

/** Why the lifecycle service or a proxy pauses, resumes or kills (LifecycleReason). */
export const LifecycleBody = {
  type: 'object',
  properties: { reason: { enum: ['api', 'timeout', 'auto', 'connect', 'drain'] } },
  required: ['reason'],
} as const;

export const EgressPoliciesQuery = {
  type: 'object',
  properties: { nodeId: { type: 'string', minLength: 1, maxLength: 256 } },
  required: ['nodeId'],
} as const;

const count = { type: 'integer', minimum: 0 } as const;
const mb = { type: 'number' } as const;

/**
 * A node's heartbeat (NodeHeartbeat): what admission and the ended-sandbox sweep read. Fields the
 * master does not know are let through: a newer node agent may send more.
 */
export const HeartbeatBody = {
  type: 'object',
  properties: {
    sandboxes: { type: 'object', properties: { running: count, paused: count }, required: ['running', 'paused'] },
    usedMemoryMB: { type: 'number', minimum: 0 },
    ended: {
      type: 'array',
      maxItems: 10_000,
      items: {
        type: 'object',
        properties: {
          sandboxId: { type: 'string', maxLength: 128 },
          reason: { enum: ['oom', 'pids_limit', 'exited'] },
          message: { type: 'string', maxLength: 65_536 },
          endedAt: { type: 'string', maxLength: 64 },
        },
        required: ['sandboxId', 'reason', 'message', 'endedAt'],
      },
    },
    memory: {
      type: 'object',
      properties: { availableMB: mb, reserveMB: mb, perSandboxMB: mb, quotaMB: mb, usedNominalMB: mb, cpuPressurePct: mb, maxCpuPressurePct: mb },
      required: ['availableMB', 'reserveMB', 'perSandboxMB', 'quotaMB', 'usedNominalMB', 'cpuPressurePct', 'maxCpuPressurePct'],
    },
  },
  required: ['sandboxes', 'usedMemoryMB'],
} as const;
