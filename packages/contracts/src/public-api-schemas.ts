/**
 * The shapes of the public REST API (docs/api.md, docs/compatibility.md): E2B's paths and shapes
 * that svc serves, plus svc's `/svc/...` extensions. Each is a JSON Schema (the draft-07 subset
 * that OpenAPI 3.1 and fastify's ajv share), so one object is at once the document's component,
 * the gateway's validator and serializer, and, through `FromSchema`, the TypeScript type of the
 * wire (public-api-types.ts).
 *
 * Where E2B (camelCase) and docs/api.md (snake_case) spell a request field differently, both
 * spellings are accepted; answers use E2B's.
 */

import { PAUSE_KINDS, RUNTIME_KINDS } from './node-agent.ts';
import { LOG_LEVELS } from './sandbox-logs.ts';
import { Node, NodeDrain, NodeLabelNames, NodeLabels } from './node-route-schemas.ts';

export { Node, NodeDrain, NodeLabelNames, NodeLabels };

const str = { type: 'string' } as const;
const bool = { type: 'boolean' } as const;
const int = { type: 'integer' } as const;
const timestamp = { type: 'string', format: 'date-time' } as const;
const stringMap = { type: 'object', additionalProperties: { type: 'string' } } as const;
const stringList = { type: 'array', items: { type: 'string' } } as const;
const onTimeout = { type: 'string', enum: ['kill', 'pause'] } as const;

/**
 * E2B's `maskRequestHost`: the Host header a sandbox's servers see on requests through the proxy,
 * `${PORT}` standing for the port asked for. A host name, IPv4 or [IPv6] with an optional port:
 * nothing that could end a header line.
 */
export const MASK_REQUEST_HOST_PATTERN = '^(?:[A-Za-z0-9._~-]|\\$\\{PORT\\}|\\[[0-9A-Fa-f:.]+\\])+(?::(?:[0-9]{1,5}|\\$\\{PORT\\}))?$';
const maskRequestHost = { type: 'string', minLength: 1, maxLength: 255, pattern: MASK_REQUEST_HOST_PATTERN, description: 'Host header for requests to the sandbox; ${PORT} is the port' } as const;

export const ErrorBody = {
  type: 'object',
  required: ['code', 'message'],
  properties: { code: int, message: str },
  additionalProperties: false,
} as const;

/**
 * svc's egress rule list, or E2B's per-host transform map. The master checks what is inside
 * (its size among it); the egress issue pins the rule's shape here.
 */
const EgressRules = { type: ['array', 'object'], description: 'svc egress rules (a list) or E2B per-host transform rules (an object)' } as const;

/** E2B's SandboxEgressProxyConfig: its types here; what is in them the master checks (egress-tunnel.ts), with 400s that name the field. */
const EgressProxy = {
  type: ['object', 'null'],
  description: 'SOCKS5 proxy the sandbox\'s outbound TCP goes through: {address: "host:port", username?, password?}',
  properties: { address: str, username: str, password: str },
} as const;

/** E2B's SandboxEgressProxyInfo: never the password. */
const EgressProxyInfo = { type: 'object', required: ['address'], properties: { address: str, username: str }, additionalProperties: false } as const;

export const NetworkConfig = {
  type: 'object',
  properties: {
    allowOut: { ...stringList, description: 'Layer-3/4 allow list: CIDRs, IPs or host names' },
    allow_out: stringList,
    denyOut: { ...stringList, description: 'Layer-3/4 deny list' },
    deny_out: stringList,
    allowPublicTraffic: { ...bool, description: 'false: data-plane requests must carry the traffic access token' },
    allow_public_traffic: bool,
    maskRequestHost,
    rules: EgressRules,
    egressProxy: EgressProxy,
  },
} as const;

export const VolumeMount = {
  type: 'object',
  required: ['name', 'path'],
  properties: {
    name: { type: 'string', minLength: 1 },
    path: { type: 'string', pattern: '^/', description: 'Absolute path inside the sandbox' },
    readOnly: bool,
    read_only: bool,
  },
} as const;

/** A volume mount as answers give it. */
export const MountedVolume = {
  type: 'object',
  required: ['name', 'path'],
  properties: { name: str, path: str, readOnly: bool },
  additionalProperties: false,
} as const;

export const NewSandbox = {
  type: 'object',
  required: ['templateID'],
  properties: {
    templateID: { type: 'string', minLength: 1, description: 'A template id or alias' },
    timeout: { type: 'integer', minimum: -1, maximum: 2147483647, description: 'Idle timeout in seconds; -1 never' },
    autoPause: { ...bool, description: 'E2B: pause instead of kill at the timeout' },
    autoPauseMemory: { ...bool, description: 'E2B: false makes the timeout pause free the memory and keep the files (not with autoResume)' },
    autoResume: {
      type: ['object', 'boolean'],
      description: 'E2B: {enabled} resumes a paused sandbox on the next request',
      properties: { enabled: bool },
    },
    lifecycle: {
      type: 'object',
      description: 'svc: what happens at the idle timeout',
      properties: { on_timeout: onTimeout, onTimeout, auto_resume: bool, autoResume: bool, keep_memory: bool, keepMemory: bool },
    },
    secure: { ...bool, default: true, description: 'Only false opts out of envd access tokens' },
    allow_internet_access: bool,
    allowInternetAccess: bool,
    metadata: stringMap,
    envVars: stringMap,
    env_vars: stringMap,
    network: NetworkConfig,
    volumeMounts: { type: 'array', items: VolumeMount },
    volume_mounts: { type: 'array', items: VolumeMount },
    cpuCount: { type: 'integer', minimum: 1 },
    memoryMB: { type: 'integer', minimum: 64 },
    nodeSelector: { ...stringMap, description: 'svc: only a node whose labels hold every name=value of it runs the sandbox (docs/cluster.md)' },
    runtime: { type: 'string', enum: RUNTIME_KINDS, description: 'svc: what runs the sandbox (docs/runtimes.md); default: the template\'s, else the node\'s' },
    mcp: {
      type: ['object', 'null'],
      description: 'E2B: the MCP servers of the sandbox\'s gateway. The SDK starts `mcp-gateway --config` with it in the sandbox after the create; the platform only checks its form (docs/mcp.md)',
    },
    iam: {
      type: 'object',
      description: 'E2B: workload tokens the egress proxy mints for ${e2b.identity.tokens.NAME} (docs/security.md)',
      properties: {
        tokens: {
          type: 'object',
          additionalProperties: { type: 'object', required: ['audience', 'tokenType'], properties: { audience: str, tokenType: str } },
        },
      },
    },
  },
} as const;

/** The answer to create, connect and resume. */
export const Sandbox = {
  type: 'object',
  required: ['sandboxID', 'templateID', 'clientID', 'envdVersion', 'domain'],
  properties: {
    sandboxID: str,
    templateID: str,
    alias: str,
    clientID: { ...str, description: 'The node that runs it' },
    envdVersion: str,
    envdAccessToken: { ...str, description: 'Absent when the sandbox was created with secure false' },
    trafficAccessToken: { type: ['string', 'null'] },
    domain: str,
  },
  additionalProperties: false,
} as const;

const listedProperties = {
  sandboxID: str,
  templateID: str,
  alias: str,
  clientID: str,
  startedAt: timestamp,
  endAt: { ...timestamp, description: 'When the idle timeout ends it, if nothing touches it first' },
  cpuCount: int,
  memoryMB: int,
  diskSizeMB: int,
  metadata: stringMap,
  state: { type: 'string', enum: ['running', 'paused'] },
  envdVersion: str,
  volumeMounts: { type: 'array', items: MountedVolume },
  pauseKind: { type: 'string', enum: PAUSE_KINDS, description: 'freeze: memory kept; snapshot: the machine written to disk (microvm); filesystem: memory freed, resuming boots it again' },
  runtime: { type: 'string', enum: ['gvisor', 'microvm'], description: 'What runs the sandbox (docs/runtimes.md)' },
  timeout: { ...int, description: 'The idle timeout in seconds' },
} as const;
const listedRequired = ['sandboxID', 'templateID', 'clientID', 'startedAt', 'cpuCount', 'memoryMB', 'diskSizeMB', 'metadata', 'state', 'envdVersion', 'volumeMounts', 'timeout'] as const;

/** A sandbox in a list. */
export const ListedSandbox = {
  type: 'object',
  required: listedRequired,
  properties: listedProperties,
  additionalProperties: false,
} as const;

/** One sandbox (GET /sandboxes/{id}): a listed sandbox with its token, network and lifecycle. */
export const SandboxDetail = {
  type: 'object',
  required: [...listedRequired, 'domain', 'allowInternetAccess', 'network', 'lifecycle'],
  properties: {
    ...listedProperties,
    envdAccessToken: str,
    domain: str,
    allowInternetAccess: { type: ['boolean', 'null'] },
    network: {
      type: 'object',
      required: ['allowOut', 'denyOut', 'allowPublicTraffic'],
      properties: { allowOut: stringList, denyOut: stringList, allowPublicTraffic: bool, maskRequestHost: str, rules: EgressRules, egressProxy: EgressProxyInfo },
      additionalProperties: false,
    },
    lifecycle: {
      type: 'object',
      required: ['onTimeout', 'autoResume'],
      properties: { onTimeout, autoResume: bool },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
} as const;

export const TimeoutRequest = {
  type: 'object',
  properties: {
    timeout: { type: ['integer', 'null'], minimum: -1, maximum: 2147483647, description: 'Seconds; absent keeps the current one' },
    memory: { ...bool, description: 'false: a paused sandbox boots again from its files, whatever memory it kept' },
  },
} as const;

/** E2B's SandboxPauseRequest. */
export const PauseRequest = {
  type: 'object',
  properties: { memory: { ...bool, default: true, description: 'false: free the memory and keep the files; resuming boots it again (no auto-resume)' } },
} as const;

export const SetTimeout = {
  type: 'object',
  required: ['timeout'],
  properties: { timeout: { type: 'integer', minimum: -1, maximum: 2147483647, description: 'Seconds from now; -1 never' } },
} as const;

export const Refresh = {
  type: 'object',
  properties: { duration: { type: 'integer', minimum: 0, maximum: 2147483647, description: 'Seconds; absent uses the sandbox\'s timeout' } },
} as const;

export const NetworkUpdate = {
  type: 'object',
  description: 'The whole egress configuration; a field left out is cleared',
  properties: { allow_internet_access: bool, allowOut: stringList, denyOut: stringList, rules: EgressRules, egressProxy: EgressProxy },
} as const;

export const SandboxMetric = {
  type: 'object',
  required: ['timestamp', 'timestampUnix', 'cpuCount', 'cpuUsedPct', 'memUsed', 'memTotal', 'diskUsed', 'diskTotal'],
  properties: {
    timestamp,
    timestampUnix: int,
    cpuCount: int,
    cpuUsedPct: { type: 'number' },
    memUsed: int,
    memTotal: int,
    memCache: int,
    diskUsed: int,
    diskTotal: int,
  },
  additionalProperties: false,
} as const;

/** E2B's SandboxLogEntry: one entry of the sandbox's own log (docs/api.md, "Sandbox logs"). */
export const SandboxLogEntry = {
  type: 'object',
  required: ['timestamp', 'level', 'message', 'fields'],
  properties: { timestamp, level: { type: 'string', enum: LOG_LEVELS }, message: str, fields: stringMap },
  additionalProperties: false,
} as const;

/** E2B's SandboxLog: an entry as one line of JSON (`level`, `message` and its fields), which E2B's CLI parses. */
export const SandboxLog = {
  type: 'object',
  required: ['timestamp', 'line'],
  properties: { timestamp, line: str },
  additionalProperties: false,
} as const;

/** E2B's SandboxLogs (GET /sandboxes/{sandboxID}/logs): the same entries both ways. */
export const SandboxLogs = {
  type: 'object',
  required: ['logs', 'logEntries'],
  properties: { logs: { type: 'array', items: SandboxLog }, logEntries: { type: 'array', items: SandboxLogEntry } },
  additionalProperties: false,
} as const;

/** E2B's SandboxLogsV2Response (GET /v2/sandboxes/{sandboxID}/logs). */
export const SandboxLogsV2Response = {
  type: 'object',
  required: ['logs'],
  properties: { logs: { type: 'array', items: SandboxLogEntry } },
  additionalProperties: false,
} as const;

/** svc's `/svc/sandbox/timeout` and `/svc/sandbox/refresh` (docs/api.md). */
export const SvcSetTimeout = {
  type: 'object',
  required: ['sandbox_id', 'timeout'],
  properties: { sandbox_id: { type: 'string', minLength: 1 }, timeout: SetTimeout.properties.timeout },
} as const;

export const SvcRefresh = {
  type: 'object',
  required: ['sandbox_id'],
  properties: { sandbox_id: { type: 'string', minLength: 1 }, duration: Refresh.properties.duration },
} as const;

export const SvcDeadline = {
  type: 'object',
  required: ['sandbox_id', 'timeout', 'end_at'],
  properties: { sandbox_id: str, timeout: int, end_at: { type: ['string', 'null'], format: 'date-time' } },
  additionalProperties: false,
} as const;

/** E2B's snapshot request: an optional name (a later snapshot given the same name takes it over). */
export const SnapshotRequest = {
  type: 'object',
  properties: { name: { type: 'string', minLength: 1, maxLength: 128, description: 'Letters, digits, ., _ and -; not a template alias' } },
} as const;

/** E2B's SnapshotInfo: what Sandbox.create takes to start from it. */
export const SnapshotInfo = {
  type: 'object',
  required: ['snapshotID', 'names'],
  properties: {
    snapshotID: { ...str, description: 'Its name when it has one, else its id; Sandbox.create takes either' },
    names: { ...stringList, description: 'Its name, when it has one' },
  },
  additionalProperties: false,
} as const;

export const ForkRequest = {
  type: 'object',
  properties: {
    count: { type: 'integer', minimum: 1, maximum: 10, default: 1, description: 'Sandboxes to start from one capture of the origin' },
    timeout: { type: 'integer', minimum: -1, maximum: 2147483647, description: 'Their idle timeout in seconds' },
  },
} as const;

/** One fork's outcome: exactly one of sandbox and error. */
export const ForkResult = {
  type: 'object',
  properties: { sandbox: Sandbox, error: ErrorBody },
  additionalProperties: false,
} as const;

export const Health = { type: 'object', required: ['ok'], properties: { ok: bool } } as const;

/** Every named shape, as the document's `components.schemas`. */
export const SCHEMAS = {
  Error: ErrorBody,
  NewSandbox,
  Sandbox,
  ListedSandbox,
  SandboxDetail,
  MountedVolume,
  VolumeMount,
  NetworkConfig,
  TimeoutRequest,
  PauseRequest,
  SetTimeout,
  Refresh,
  NetworkUpdate,
  SandboxMetric,
  SandboxLogEntry,
  SandboxLog,
  SandboxLogs,
  SandboxLogsV2Response,
  SvcSetTimeout,
  SvcRefresh,
  SvcDeadline,
  SnapshotRequest,
  SnapshotInfo,
  ForkRequest,
  ForkResult,
  Node,
  NodeLabels,
  NodeLabelNames,
  NodeDrain,
  Health,
} as const;
