/**
 * The node agent's request bodies and its logs query as JSON Schemas, which NODE_AGENT_ROUTES
 * puts on its routes (node-agent-routes.ts): the node agent refuses another body with a 400
 * naming the field before its handler runs (common/schema-validation.ts), and the handler and
 * NodeAgentClient see their types. The rest of the code uses the interfaces of
 * node-agent-types.ts; node-agent-routes.ts holds each schema and its interface together.
 *
 * The schemas take what the node agent has always taken:
 * - a body's other fields are let through, unread (no body refuses unknown fields);
 * - a field the node agent fills in may be absent (diskSizeMB and timeoutMs from its
 *   configuration, exec's user and timeoutMs, an artifact's sizeBytes), and the maps and lists
 *   it empties (envVars, metadata, network and its lists, volumes) may be null too;
 * - pause and resume take no body at all, null or an empty text body as `{}`;
 * - the logs query takes an empty parameter (`?cursor=`) as an absent one.
 * What a schema cannot say the node agent checks and fills in (node-agent/src/validate.ts):
 * defaults, null and '' as absent, sha256 in lower case, the volume mounts as a whole
 * (volumes.ts, parseVolumeMountsOnNode) and the egress lists' entries (its egress policy).
 */
import { RUNTIME_KINDS } from './node-agent-types.ts';
import { LOG_DIRECTIONS, LOG_LEVELS, SANDBOX_LOG_LIMITS } from './sandbox-logs.ts';

/** A sandbox id: what the node agent names its sandbox's files, network and cgroups after. */
export const SANDBOX_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$';
/** Artifact and layer ids name files on the node (node-agent/src/artifacts). */
const FILE_ID = { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' } as const;
const ENV_NAME = '^[A-Za-z_][A-Za-z0-9_]*$';
const NO_NUL = '^[^\\u0000]*$';

const bool = { type: 'boolean' } as const;
const sha256 = { type: 'string', pattern: '^[0-9a-fA-F]{64}$' } as const;
const bytes = { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } as const;
const nonEmpty = { type: 'string', minLength: 1 } as const;
const absolutePath = { type: 'string', pattern: '^/[^\\u0000]*$' } as const;
const userName = { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_.-]{0,31}$', description: 'A user of the sandbox\'s image' } as const;
const timeoutMs = { type: 'integer', minimum: 1, maximum: 3_600_000 } as const;
/** Names and values of a sandbox's environment; null is none. */
const envVars = { type: ['object', 'null'], propertyNames: { pattern: ENV_NAME }, additionalProperties: { type: 'string', pattern: NO_NUL } } as const;
const stringListOrNull = { type: ['array', 'null'], items: { type: 'string' } } as const;

/** EnsureArtifact: the artifact's id is the path's. */
export const EnsureArtifactBody = {
  type: 'object',
  required: ['sha256', 'downloadUrl'],
  properties: {
    sha256,
    sizeBytes: { ...bytes, description: 'Absent: 0' },
    downloadUrl: nonEmpty,
    localPath: { type: 'string', pattern: '^/', description: 'An absolute path' },
  },
} as const;

/** ArtifactRef. */
const Artifact = {
  ...EnsureArtifactBody,
  required: ['artifactId', ...EnsureArtifactBody.required],
  properties: { artifactId: FILE_ID, ...EnsureArtifactBody.properties },
} as const;

/** LayerRef. */
const Layer = {
  type: 'object',
  required: ['layerId', 'sha256', 'sizeBytes'],
  properties: {
    layerId: FILE_ID,
    sha256,
    sizeBytes: bytes,
    downloadUrl: nonEmpty,
    contents: { type: 'string', enum: ['filesystem', 'memory'] },
  },
} as const;

/** The egress policy of a create and of a network update; null, or a list of it null, is empty. */
const Network = {
  type: ['object', 'null'],
  properties: {
    allowOut: stringListOrNull,
    denyOut: stringListOrNull,
    steer: {
      type: ['array', 'null'],
      items: {
        type: 'object',
        required: ['port', 'scheme'],
        properties: { port: { type: 'integer', minimum: 1, maximum: 65535 }, scheme: { type: 'string', enum: ['http', 'https'] } },
      },
    },
    tunnel: { type: ['boolean', 'null'] },
  },
} as const;

/** VolumeMountOnNode[]: its shape; parseVolumeMountsOnNode (volumes.ts) checks the values and the mounts together. Null is none. */
const Volumes = {
  type: ['array', 'null'],
  items: {
    type: 'object',
    required: ['volumeId', 'driver', 'path'],
    properties: { volumeId: { type: 'string' }, driver: { type: 'string' }, privateData: { type: ['string', 'null'] }, path: { type: 'string' }, readOnly: bool },
  },
} as const;

/** CreateSandboxOnNode. */
export const CreateSandboxBody = {
  type: 'object',
  required: ['sandboxId', 'templateId', 'artifact', 'cpuCount', 'memoryMB'],
  properties: {
    sandboxId: { type: 'string', pattern: SANDBOX_ID_PATTERN },
    templateId: nonEmpty,
    artifact: Artifact,
    cpuCount: { type: 'integer', minimum: 1, maximum: 64 },
    memoryMB: { type: 'integer', minimum: 64, maximum: 1024 * 1024 },
    diskSizeMB: { type: 'integer', minimum: 1, maximum: 16 * 1024 * 1024, description: 'Absent: the node agent\'s default' },
    envVars,
    envdAccessToken: nonEmpty,
    allowInternetAccess: { ...bool, description: 'Absent: true' },
    network: Network,
    metadata: { type: ['object', 'null'], additionalProperties: { type: 'string', pattern: NO_NUL } },
    timeoutMs: { ...timeoutMs, description: 'Absent: the node agent\'s default' },
    layer: Layer,
    defaultUser: userName,
    defaultWorkdir: { ...absolutePath, maxLength: 4096 },
    volumes: Volumes,
    runtime: { type: 'string', enum: RUNTIME_KINDS },
  },
} as const;

/** No body, null or an empty text body: `{}`. */
const EMPTY = { const: '' } as const;

/** PauseOnNode. */
export const PauseBody = {
  anyOf: [{ type: ['object', 'null'], properties: { memory: bool } }, EMPTY],
} as const;

/** ResumeOnNode. */
export const ResumeBody = {
  anyOf: [{ type: ['object', 'null'], properties: { memory: bool, envVars, envdAccessToken: nonEmpty, volumes: Volumes } }, EMPTY],
} as const;

/** SnapshotSandboxOnNode. */
export const SnapshotBody = {
  type: 'object',
  required: ['layerId'],
  properties: { layerId: FILE_ID, memory: bool },
} as const;

/** NetworkUpdateOnNode. */
export const NetworkUpdateBody = {
  type: 'object',
  required: ['allowInternetAccess'],
  properties: { allowInternetAccess: bool, network: Network },
} as const;

/** ExecOnNode. */
export const ExecBody = {
  type: 'object',
  required: ['command'],
  properties: {
    command: { type: 'string', pattern: '\\S', description: 'Not blank' },
    user: { ...userName, description: 'Absent: root' },
    cwd: absolutePath,
    envVars,
    timeoutMs: { ...timeoutMs, description: 'Absent: 600 000' },
    stdin: {
      type: 'object',
      required: ['url', 'sha256', 'sizeBytes'],
      properties: { url: { type: 'string', pattern: '^(/|https?://)', description: 'A path on the master or an http(s) URL' }, sha256, sizeBytes: bytes },
    },
  },
} as const;

/** A query parameter given empty (`?level=`), which counts as absent. */
const orEmpty = <const S extends object>(s: S) => ({ anyOf: [s, EMPTY] }) as const;

/** SandboxLogsQuery, as query text (sandbox-logs.ts, SANDBOX_LOG_LIMITS). */
export const SandboxLogsQueryParams = {
  type: 'object',
  properties: {
    cursor: orEmpty({ type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    limit: { ...orEmpty({ type: 'integer', minimum: 1, maximum: SANDBOX_LOG_LIMITS.maxEntries }), default: SANDBOX_LOG_LIMITS.defaultEntries },
    direction: { ...orEmpty({ type: 'string', enum: LOG_DIRECTIONS }), default: 'forward' },
    level: orEmpty({ type: 'string', enum: LOG_LEVELS }),
    search: { type: 'string', maxLength: SANDBOX_LOG_LIMITS.searchMaxChars },
  },
} as const;
