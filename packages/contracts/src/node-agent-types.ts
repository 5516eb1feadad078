/** The node agent's wire types: what the master sends it and what it answers (node-agent.ts lists the routes). */
import type { ExtInfo, NodeVolumeAttachment, VolumeMountOnNode } from './volumes.ts';
import type { NodeLoad } from './node-load.ts';

export const RUNTIME_KINDS = ['gvisor', 'microvm'] as const;
export type RuntimeKind = typeof RUNTIME_KINDS[number];
/**
 * freeze: processes stopped, memory kept. snapshot: state written to disk, nothing left running.
 * filesystem: processes ended and memory freed, files kept; resuming boots the sandbox again.
 */
export const PAUSE_KINDS = ['freeze', 'snapshot', 'filesystem'] as const;
export type PauseKind = typeof PAUSE_KINDS[number];

export interface ArtifactRef {
  artifactId: string;
  sha256: string;
  sizeBytes: number;
  /** Where the node agent downloads the ext4 image from (through the master). */
  downloadUrl: string;
  /**
   * Where the image lies on the template center's disk when its store is local: a node agent on
   * the same filesystem hard-links it and checks its sha256 instead of downloading it (docs/
   * templates.md); anywhere else the download is used.
   */
  localPath?: string;
}

export interface CreateSandboxOnNode {
  sandboxId: string;
  templateId: string;
  artifact: ArtifactRef;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envVars: Record<string, string>;
  /** Set when the sandbox is secure: envd then requires X-Access-Token. */
  envdAccessToken?: string;
  /** false: no outbound traffic except what allowOut names. */
  allowInternetAccess: boolean;
  /**
   * steer: the TCP ports of its layer-7 rules, which go to the egress proxy (docs/egress.md);
   * tunnel: its other TCP goes to the proxy's tunnel listener, on to its SOCKS5 proxy.
   */
  network: { allowOut: string[]; denyOut: string[]; steer?: Array<{ port: number; scheme: 'http' | 'https' }>; tunnel?: boolean };
  metadata: Record<string, string>;
  /** Deadline the master gives this call (create_timeout_insec), for the agent's own cleanup. */
  timeoutMs: number;
  /** Start from this captured layer (a snapshot's files) instead of an empty writable layer. */
  layer?: LayerRef;
  /**
   * The user commands run as and the directory they start in when a request names none: a built
   * template's last USER and WORKDIR (envd's /init defaultUser, defaultWorkdir). Absent: envd's
   * own (`user`, its home).
   */
  defaultUser?: string;
  defaultWorkdir?: string;
  /**
   * Volumes to attach (each once) and mount, from the master's current volume records. A node
   * agent without volume support ignores them (docs/cluster.md "Upgrade order"); the master sends them only
   * to nodes whose NodeInfo.features names NODE_FEATURE_VOLUMES.
   */
  volumes?: VolumeMountOnNode[];
  /** Which of the node's runtimes runs it (NodeInfo.runtimes); absent: the node's default. */
  runtime?: RuntimeKind;
}

/**
 * A captured layer a create starts from. With downloadUrl the node fetches it when it lacks it
 * (a stored snapshot, through the master) and keeps it, sha256-checked; without, it must be on
 * the node already (a fork's capture, which never leaves the origin's node): 404 otherwise.
 */
export interface LayerRef {
  layerId: string;
  sha256: string;
  sizeBytes: number;
  downloadUrl?: string;
  /** What the archive holds (a node that downloads it records so); absent: 'filesystem'. */
  contents?: LayerContents;
}

/** POST /v1/sandboxes/:id/pause. memory false: a filesystem pause (processes ended, files kept). */
export interface PauseOnNode {
  memory?: boolean;
}

/**
 * POST /v1/sandboxes/:id/resume. A sandbox paused without its memory boots again and is given
 * its identity anew: its environment and envd access token (the node keeps no secrets on disk).
 * memory false on a frozen sandbox: drop its memory and boot it again from its files.
 */
export interface ResumeOnNode {
  memory?: boolean;
  envVars?: Record<string, string>;
  envdAccessToken?: string;
  /**
   * A sandbox that boots again re-attaches its volumes: the master's current records of them
   * (re-validated: a volume deleted meanwhile fails the resume). Absent: the node's own.
   */
  volumes?: VolumeMountOnNode[];
}

/**
 * Capture a sandbox's writable layer under this id (snapshots and forks). A paused sandbox is
 * captured as it lies, without waking it (a pause package, docs/cluster.md): a saved machine
 * ('snapshot' pause) whole, a 'filesystem' pause's files; a frozen one is 409.
 */
export interface SnapshotSandboxOnNode {
  layerId: string;
  /**
   * Capture the running machine too (its memory and processes) where the runtime can
   * (microvm); otherwise, or when false, the files alone. Template builds ask for files.
   */
  memory?: boolean;
}

/** What a captured layer holds: the sandbox's files, or its whole machine (files, memory, processes: microvm). */
export type LayerContents = 'filesystem' | 'memory';

/** The sha256 of a layer's archive (GET /v1/layers/:id/archive), and of a layer upload to the template center. */
export const LAYER_SHA256_HEADER = 'x-svc-layer-sha256';

/** A writable layer captured from a sandbox and kept on a node. */
export interface LayerOnNode {
  layerId: string;
  sha256: string;
  sizeBytes: number;
  /** The template artifact the layer lies over; a create from the layer uses the same. */
  artifactId: string;
  /** The sandbox it was captured from; absent on a node that downloaded it from the store. */
  sandboxId?: string;
  /** What it holds: the sandbox's files, or on microvm its whole machine ('memory'), which only that runtime restores. */
  contents: LayerContents;
  createdAt: string;
}

/**
 * POST /v1/sandboxes/:id/exec: a shell command run to its end inside a running sandbox, as the
 * template builder's steps run (`/bin/sh -c command`). The answer is NDJSON (ExecStreamLine): the
 * output as it comes, then the result, whose output is whole up to EXEC_OUTPUT_LIMIT bytes a
 * stream (the end kept, `truncated` set). A failure before the first line is an ordinary error
 * answer; one after it, an `error` line.
 */
export interface ExecOnNode {
  command: string;
  /** A user of the sandbox's image (default root). */
  user?: string;
  /** Absolute; default the user's home (/ for root, and for a user without one). */
  cwd?: string;
  envVars?: Record<string, string>;
  /** Default 600 000; at most 3 600 000. A command past it is killed: exit code 124. */
  timeoutMs?: number;
  /**
   * The command's standard input: a blob the node downloads first (a path is taken relative to
   * the master), checked against its sha256 and size (a build's context files for COPY).
   */
  stdin?: ExecInput;
}

export interface ExecInput {
  url: string;
  sha256: string;
  sizeBytes: number;
}

export interface ExecResultOnNode {
  exitCode: number;
  stdout: string;
  stderr: string;
  truncated?: boolean;
}

export type ExecStreamLine = { stdout: string } | { stderr: string } | { result: ExecResultOnNode } | { error: { status: number; message: string } };

export const EXEC_OUTPUT_LIMIT = 256 * 1024;

/** A running sandbox's new egress policy, replacing the one it had (E2B's updateNetwork). */
export type NetworkUpdateOnNode = Pick<CreateSandboxOnNode, 'allowInternetAccess' | 'network'>;

export interface NodeSandbox {
  sandboxId: string;
  templateId: string;
  state: 'running' | 'paused';
  /** IPv4 address at which the host reaches envd and user ports. */
  address: string;
  envdPort: number;
  envdVersion: string;
  runtime: RuntimeKind;
  pauseKind?: PauseKind;
  /** Bytes on disk of the snapshot when pauseKind is snapshot. */
  snapshotBytes?: number;
  cpuCount: number;
  memoryMB: number;
  startedAt: string;
  /** True when the create was served by a warm-pool sandbox. */
  fromWarmPool?: boolean;
  /** Volume count flips of this operation (create, pause, resume), for the master's refcount. */
  extInfo?: ExtInfo;
}

/**
 * oom: the host's OOM killer stopped the whole sandbox; pids_limit: it met its cap of host tasks
 * and stopped; exited: its processes ended, cause unknown.
 */
export type SandboxEndReason = 'oom' | 'pids_limit' | 'exited';

/** A sandbox that stopped without being asked to; the agent released it and remembers why. */
export interface EndedSandbox {
  sandboxId: string;
  reason: SandboxEndReason;
  message: string;
  endedAt: string;
}

export interface SandboxMetrics {
  timestampUnix: number;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
}

/** Levels of a sandbox log entry, lowest first (LOG_LEVELS in sandbox-logs.ts). */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** One entry of a sandbox's own log (E2B's SandboxLogEntry). */
export interface SandboxLogEntry {
  /** ISO 8601, milliseconds. */
  timestamp: string;
  level: LogLevel;
  message: string;
  fields: Record<string, string>;
}

/**
 * GET /v1/sandboxes/:id/logs, on the node agent and the master alike (E2B's v2 query), checked to
 * the bounds of SANDBOX_LOG_LIMITS: by the node agent's route schema (node-agent-schemas.ts), by
 * parseSandboxLogsQuery on the master (sandbox-logs.ts). The entries are the sandbox's console
 * file on its node: envd's lines and the node's boot marks.
 */
export interface SandboxLogsQuery {
  /** Milliseconds since the epoch: forward, entries at or after it; backward, at or before it (default now). */
  cursor?: number;
  /** 1 to 1000; default 1000 (E2B's). */
  limit?: number;
  /** forward (default): oldest first; backward: newest first. */
  direction?: 'forward' | 'backward';
  /** The lowest level answered. */
  level?: LogLevel;
  /** A case-sensitive part of the message, at most 256 characters. */
  search?: string;
}

export interface SandboxLogs {
  logs: SandboxLogEntry[];
}

export interface NodeInfo {
  nodeId: string;
  address: string;
  /** The node's default runtime: what runs a create that names none. */
  runtime: RuntimeKind;
  /** Every runtime the node offers, the default first (absent from older agents: just `runtime`). */
  runtimes?: RuntimeKind[];
  /** Pause kinds the default runtime's driver offers, best first. */
  pauseKinds: PauseKind[];
  capacity: { cpuCount: number; memoryMB: number };
  pausedResourceReleaseRatio: number;
  sandboxes: { running: number; paused: number };
  version: string;
  /** The admin API of this host's egress proxy, where the master sends its sandboxes' policies; absent: none. */
  egressAdminUrl?: string;
  /** The warm pool: sandboxes started ahead, and how creates fared with it. */
  warmPool?: WarmPoolStats;
  /** What this agent supports beyond the base protocol (NODE_FEATURE_VOLUMES); absent on old agents. */
  features?: string[];
  /** Labels from its configuration (node_agent.labels), set on the node at each registration. */
  labels?: Record<string, string>;
}

export interface WarmPoolStats {
  /** Creates served by a warm sandbox, and creates of the pool's shape that found it empty. */
  hits: number;
  misses: number;
  ready: number;
  /** Per template artifact: ready now and the size demand has set. */
  artifacts: Record<string, { ready: number; target: number; hits: number; misses: number }>;
}

export interface EnsureArtifact {
  sha256: string;
  sizeBytes: number;
  downloadUrl: string;
  /** ArtifactRef.localPath. */
  localPath?: string;
}

export interface ArtifactOnNode {
  artifactId: string;
  sha256: string;
  sizeBytes: number;
  path: string;
}
