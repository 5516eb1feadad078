/**
 * The SDK's public data types and options, shaped like the e2b SDK's where one exists.
 */
import type { ConnectionOpts } from './config.ts';

// ---------------------------------------------------------------- sandboxes

/** An egress rule in svc's own form (docs/api.md, egress rules): first match wins, no match is denied. */
export interface EgressRule {
  name?: string;
  match?: {
    scheme?: 'http' | 'https';
    port?: number;
    sni?: string;
    host?: string;
    method?: string[];
    path?: string;
  };
  action: {
    allow: boolean;
    audit?: 'none' | 'metadata' | 'full';
    inject?: { header: string; format?: string; secret: string }[];
  };
}

/** e2b's per-host rule: headers injected into matching outbound requests. */
export interface SandboxNetworkRule {
  transform?: { headers?: Record<string, string> };
}

/** Either svc's rule list or e2b's host → rules map (docs/egress.md). */
export type SandboxNetworkRules = EgressRule[] | Record<string, SandboxNetworkRule[]> | Map<string, SandboxNetworkRule[]>;

export interface SandboxNetworkSelectorContext {
  /** '0.0.0.0/0' */
  allTraffic: string;
  /** Hosts that e2b-style `rules` name. */
  rules: Map<string, SandboxNetworkRule[]>;
}
export type SandboxNetworkSelector = string[] | ((ctx: SandboxNetworkSelectorContext) => string[]);

export interface SandboxNetworkOpts {
  /** Layer-3/4 allow list: CIDRs, IPs or host names. */
  allowOut?: SandboxNetworkSelector;
  /** Layer-3/4 deny list. */
  denyOut?: SandboxNetworkSelector;
  /** false: every data-plane request must carry the sandbox's traffic access token. */
  allowPublicTraffic?: boolean;
  /** The Host header the sandbox's servers see on requests through the proxy; `${PORT}` is the port. */
  maskRequestHost?: string;
  rules?: SandboxNetworkRules;
  /**
   * A SOCKS5 proxy (`host:port`, RFC 1929 credentials) every outbound TCP connection of the
   * sandbox goes through, after allowOut/denyOut and the rules; connections fail, never go
   * direct, when it is down (docs/egress.md "Bring your own proxy"). Reads never return the password.
   */
  egressProxy?: { address: string; username?: string; password?: string };
}

/**
 * What happens at the idle timeout, as in e2b: the bare action, or `{action: 'pause', keepMemory}`
 * to choose the kind of pause. `keepMemory: false` frees the memory and keeps the files; resuming
 * (through `connect`, never through traffic) boots the sandbox again from them.
 */
export type SandboxOnTimeout = 'kill' | 'pause' | { action: 'pause'; keepMemory?: boolean } | { action: 'kill' };

export interface SandboxLifecycle {
  /** What happens at the idle timeout. Default 'kill'. */
  onTimeout?: SandboxOnTimeout;
  /**
   * Resume a paused sandbox on the next request to it. Default false. Needs `onTimeout` pause
   * and is refused with `keepMemory: false`.
   */
  autoResume?: boolean;
}

/**
 * A mount target: a volume id or name; a `Volume` (mounted by its id, read-write); or `{name,
 * readOnly}`, which `VolumeMount(volume, {readOnly})` makes. The server reads a mount's `name` as a
 * volume id first, then as the name of one of the team's volumes.
 */
export type VolumeMountTarget = string | { readonly volumeId: string } | { name: string; readOnly?: boolean };

export interface SandboxOpts extends ConnectionOpts {
  template?: string;
  /** Idle timeout in milliseconds; NEVER_TIMEOUT (-1) never times out, 0 times out at once. */
  timeoutMs?: number;
  metadata?: Record<string, string>;
  /** Environment variables of every process started in the sandbox. */
  envs?: Record<string, string>;
  /** Accepted for compatibility; every sandbox gets an envd access token. */
  secure?: boolean;
  allowInternetAccess?: boolean;
  network?: SandboxNetworkOpts;
  lifecycle?: SandboxLifecycle;
  /**
   * Mount path → volume (e2b's map form: `{'/data': volume, '/ro': VolumeMount(other, {readOnly: true}), '/x': 'name-or-id'}`),
   * or a list of `{name, path, readOnly}` (`{path, ...VolumeMount(volume)}` for a `Volume`). A volume
   * may be mounted once per sandbox; paths are absolute.
   */
  volumeMounts?: Record<string, VolumeMountTarget> | { name: string; path: string; readOnly?: boolean }[];
  /** svc extensions: resources of the sandbox. */
  cpuCount?: number;
  memoryMB?: number;
  /** svc extension: what runs it (docs/runtimes.md); default: the template's, else the node's. */
  runtime?: 'gvisor' | 'microvm';
  /** svc extension: only a node whose labels hold every name=value of it runs the sandbox (docs/cluster.md). */
  nodeSelector?: Record<string, string>;
  /**
   * Workload tokens by name (E2B's iam): a rule's header value `${e2b.identity.tokens.NAME}` is
   * replaced on the way out by a JWT the platform signs for this sandbox (docs/security.md).
   */
  iam?: { tokens: Record<string, { audience: string; tokenType: 'JWT-SVID' }> };
}

/**
 * How `connect` brings a paused sandbox back: 'restore' (the default) resumes it as it was
 * paused; 'reboot' boots it again from its files, dropping whatever memory it kept. A no-op for
 * a running sandbox; a sandbox paused without its memory always boots again.
 */
export type SandboxOnResume = 'restore' | 'reboot';

export interface SandboxConnectOpts extends ConnectionOpts {
  /**
   * Omitted keeps the current timeout; NEVER_TIMEOUT never times out; N > 0 makes sure at
   * least N ms remain. 0 and values below -1 are rejected by the server.
   */
  timeoutMs?: number;
  /** Default 'restore'; any other value than 'restore' and 'reboot' is an InvalidArgumentError. */
  onResume?: SandboxOnResume;
}

export type SandboxApiOpts = Pick<ConnectionOpts, 'apiKey' | 'apiUrl' | 'headers' | 'requestTimeoutMs' | 'signal'>;

export interface SandboxPauseOpts extends SandboxApiOpts {
  /**
   * Default true: the memory is kept. false frees the memory and keeps the files; connecting
   * boots the sandbox again from them, and traffic does not resume it.
   */
  keepMemory?: boolean;
}

export interface SandboxForkOpts extends ConnectionOpts {
  /** How many sandboxes to start from one capture of the origin, 1 to 10. Default 1. */
  count?: number;
  /** Their idle timeout in milliseconds (sent in whole seconds); default the server's. */
  timeoutMs?: number;
}

// ---------------------------------------------------------------- snapshots

export interface CreateSnapshotOpts extends SandboxApiOpts {
  /**
   * Letters, digits, '.', '_' and '-', at most 128, not a template's name; a later snapshot
   * given the same name takes it over. Without one, the snapshot is known by its id.
   */
  name?: string;
}

export interface SnapshotInfo {
  /** Its name when it has one, else its id (`snap-...`); `Sandbox.create` takes it where a template goes. */
  snapshotId: string;
  /** Its name, when it has one. */
  names: string[];
}

export interface SnapshotListOpts extends Omit<SandboxApiOpts, 'signal'> {
  /** Only snapshots taken of this sandbox. */
  sandboxId?: string;
  /** Only the snapshot with this id or name. */
  name?: string;
  /** Page size (1 to 1000). Default 100. */
  limit?: number;
  nextToken?: string;
}

export type SandboxState = 'running' | 'paused';

export interface SandboxListOpts extends Omit<SandboxApiOpts, 'signal'> {
  query?: {
    metadata?: Record<string, string>;
    state?: SandboxState[];
  };
  /** Page size. */
  limit?: number;
  nextToken?: string;
}

export interface SandboxInfo {
  sandboxId: string;
  templateId: string;
  /** Template alias. */
  name?: string;
  metadata: Record<string, string>;
  startedAt: Date;
  /** Absent when the sandbox never times out. */
  endAt?: Date;
  state: SandboxState;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB?: number;
  envdVersion: string;
  allowInternetAccess?: boolean;
  network?: { allowOut?: string[]; denyOut?: string[]; allowPublicTraffic?: boolean; rules?: unknown };
  lifecycle?: { onTimeout: 'kill' | 'pause'; autoResume: boolean };
  volumeMounts: { name: string; path: string; readOnly?: boolean }[];
  sandboxDomain?: string;
  /** While paused: memory kept ('freeze'), written out ('snapshot'), or freed with the files kept ('filesystem': resuming boots it again). */
  pauseKind?: 'freeze' | 'snapshot' | 'filesystem';
  /** What runs it (docs/runtimes.md). */
  runtime?: 'gvisor' | 'microvm';
  /** The idle timeout in seconds (-1: never). */
  timeout?: number;
}

export interface SandboxMetrics {
  timestamp: Date;
  cpuUsedPct: number;
  cpuCount: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
}

export type { LogLevel } from '@svc/contracts/node-agent';
import type { LogLevel } from '@svc/contracts/node-agent';

/** One entry of the sandbox's own log: envd's lines and the sandbox's boots, as its node keeps them. */
export interface SandboxLogEntry {
  timestamp: Date;
  level: LogLevel;
  message: string;
  fields: Record<string, string>;
}

export interface SandboxLogsOpts extends SandboxApiOpts {
  /** forward: entries at or after it (default: from the first); backward: at or before it (default: now). */
  cursor?: Date | number;
  /** 1 to 1000; default 1000. */
  limit?: number;
  /** forward (default): oldest first; backward: newest first. */
  direction?: 'forward' | 'backward';
  /** The lowest level returned. */
  level?: LogLevel;
  /** Only entries whose message holds this text (case-sensitive). */
  search?: string;
}

// ---------------------------------------------------------------- templates

export type TemplateSource =
  | { image: string }
  | { ociLayout: string }
  | { dockerArchive: string }
  | { rootfsTar: string };

export type TemplateCreateOpts = TemplateSource & {
  alias?: string;
  registryAuth?: { username: string; password: string };
  /** Pull over plain HTTP. */
  insecureRegistry?: boolean;
  /** os/arch[/variant]; default the host's. */
  platform?: string;
  /** Bake the egress proxy's root CA into the image. Default true. */
  withSvcCa?: boolean;
  cpuCount?: number;
  memoryMB?: number;
  diskSizeMB?: number;
  /** Started in each sandbox of the template; a create answers once readyCmd exits 0 (docs/templates.md). */
  startCmd?: string;
  /** Needs startCmd. */
  readyCmd?: string;
  /** What runs its sandboxes when a create names none (docs/runtimes.md); default: the node's. */
  runtime?: 'gvisor' | 'microvm';
};

export interface TemplateBuildRef {
  templateId: string;
  jobId: string;
  status: string;
}

export interface TemplateInfo {
  templateId: string;
  alias?: string;
  status: 'building' | 'ready' | 'failed';
  sourceImageRef?: string;
  latestJobId?: string;
  artifactId?: string;
  createdAt: Date;
  updatedAt?: Date;
  imageInfo?: unknown;
  cpuCount?: number;
  memoryMB?: number;
  diskSizeMB?: number;
  withSvcCa?: boolean;
  startCmd?: string;
  readyCmd?: string;
  runtime?: 'gvisor' | 'microvm';
  error?: string;
}

export type JobStatus = 'PENDING' | 'RUNNING' | 'BUILT' | 'FAILED';
export type JobPhase = 'PULLING' | 'BUILDING' | 'UPLOADING' | 'DISTRIBUTING';

export interface LayerProgress {
  digest: string;
  totalBytes?: number;
  doneBytes: number;
}

export interface JobInfo {
  jobId: string;
  templateId: string;
  kind: string;
  status: JobStatus;
  phase?: JobPhase;
  error?: string;
  progress: { layers: LayerProgress[]; message?: string };
  createdAt: Date;
  updatedAt?: Date;
  finishedAt?: Date;
}

// ---------------------------------------------------------------- nodes

export interface NodeInfo {
  id: string;
  labels: Record<string, string>;
  /** Everything else the server reports, unchanged. */
  [key: string]: unknown;
}

/** A node's drain, under way or ended (Node.drain, Node.drainStatus; docs/cluster.md). */
export interface NodeDrainResult {
  node: NodeInfo;
  /** running: under way; done; stopped: undrained first; interrupted: its master stopped (drain again). */
  state: 'running' | 'done' | 'stopped' | 'interrupted';
  /** The node's sandboxes when the drain started, and how many it has yet to go over. */
  total: number;
  remaining: number;
  startedAt: string;
  finishedAt?: string;
  /** Running sandboxes paused, stored and resumed on another node. */
  moved: string[];
  /** Paused sandboxes whose state is now in the artifact store: they resume on another node. */
  stored: string[];
  /** What could not be moved, and why (drain again once it is mended). */
  failed: Array<{ sandboxId: string; message: string }>;
}

export interface NodeDrainOpts extends SandboxApiOpts {
  /** Wait for the drain to end (default true); false answers as soon as it has started. */
  wait?: boolean;
  /** Told of the drain as it starts and each time it goes over a sandbox, while waiting. */
  onProgress?: (status: NodeDrainResult) => void;
  /** How often the status is asked while waiting (default 1000 ms). */
  pollIntervalMs?: number;
}

export * from './envd-types.ts';
