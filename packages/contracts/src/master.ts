/**
 * The master's contract with the API gateway (and any other trusted caller). Normalised shapes:
 * the gateway translates E2B's wire format to and from these.
 *   POST   /v1/sandboxes                  → 201 SandboxRecord      (body CreateSandboxInput)
 *   GET    /v1/sandboxes                  → SandboxPage            (query ListSandboxesQuery)
 *   GET    /v1/sandboxes/:id              → SandboxRecord | 404 | 410
 *   DELETE /v1/sandboxes/:id              → 204 | 404 | 408 | 503 (Retry-After: 2)
 *   POST   /v1/sandboxes/:id/pause        → SandboxRecord | 409 already paused
 *   PUT    /v1/sandboxes/:id/network      → SandboxRecord | 409 not running (body: E2B's SandboxNetworkUpdateConfig)
 *   POST   /v1/sandboxes/:id/connect      → ConnectResult          (body { timeout? })
 *   POST   /v1/sandboxes/:id/resume       → SandboxRecord          (body { timeout? }, deprecated semantics)
 *   POST   /v1/sandboxes/:id/timeout      → SandboxRecord          (body { timeout })
 *   POST   /v1/sandboxes/:id/refresh      → SandboxRecord          (body { duration? })
 *   GET    /v1/sandboxes/:id/metrics      → SandboxMetrics[]      (query MetricsRange)
 *   GET    /v1/sandboxes/:id/logs         → SandboxLogs          (query SandboxLogsQuery: the node agent's, passed on)
 *   GET    /v1/nodes, /v1/nodes/:id       → NodeRecord[] / NodeRecord
 *   POST   /v1/nodes/:id/labels           → NodeRecord  (body { labels: {name: value} })
 *   DELETE /v1/nodes/:id/labels           → NodeRecord  (body { names: string[] })
 *   POST   /v1/nodes/:id/drain            → 202 DrainStatus (starts it, or answers the one under way; docs/cluster.md)
 *   GET    /v1/nodes/:id/drain            → DrainStatus (the latest drain of the node; 404 when there is none)
 *   DELETE /v1/nodes/:id/drain            → NodeRecord  (takes sandboxes again)
 *   /svc/template...                      → see docs/api.md
 */
import { badRequest, JsonClient } from '@svc/common';
import type { NodeLoad, PauseKind, RuntimeKind, SandboxLogs, SandboxLogsQuery, SandboxMetrics } from './node-agent.ts';
import type { OnTimeout, SandboxState, TerminateReason } from './master-internal.ts';

export type { SandboxState, OnTimeout, TerminateReason };

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

export interface NetworkConfig {
  allowOut: string[];
  denyOut: string[];
  allowPublicTraffic: boolean;
  /** E2B's maskRequestHost: the Host header the sandbox sees on proxied requests (`${PORT}`: the port). */
  maskRequestHost?: string;
  /** Egress L7 rules, kept for the egress proxy (later issue). */
  rules?: unknown;
}

export interface VolumeMount {
  name: string;
  path: string;
  readOnly: boolean;
}

export interface CreateSandboxInput {
  /** Template id or alias. */
  template: string;
  /** Seconds; undefined = server default. */
  timeout?: number;
  onTimeout: OnTimeout;
  autoResume: boolean;
  /** false: the idle-timeout pause frees the memory and keeps the files (cannot go with autoResume). */
  pauseMemory?: boolean;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  secure: boolean;
  /** undefined = not set explicitly (allowed). */
  allowInternetAccess?: boolean;
  network: NetworkConfig;
  volumeMounts: VolumeMount[];
  cpuCount?: number;
  memoryMB?: number;
  /** Workload tokens by name (E2B's iam.tokens): `${e2b.identity.tokens.NAME}` in a transform mints one. */
  iam?: { tokens: Record<string, IamToken> };
  /** svc: what runs it (docs/runtimes.md); undefined: the template's, else the chosen node's default. */
  runtime?: RuntimeKind;
  /** svc: only a node whose labels hold every name=value of it runs the sandbox (docs/cluster.md). */
  nodeSelector?: Record<string, string>;
}

export interface IamToken {
  audience: string;
  /** 'JWT-SVID', the one kind there is. */
  tokenType: string;
}

export const IAM_LIMITS = { tokens: 16, nameBytes: 128, audienceBytes: 1024 } as const;

export interface SandboxRecord {
  sandboxId: string;
  /** The team it belongs to (docs/security.md). */
  teamId: string;
  templateId: string;
  alias?: string;
  nodeId: string;
  state: SandboxState;
  pauseKind?: PauseKind;
  /** What runs it: its node's runtime (docs/runtimes.md). */
  runtime?: RuntimeKind;
  envdVersion: string;
  envdAccessToken?: string;
  trafficAccessToken?: string;
  secure: boolean;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  metadata: Record<string, string>;
  network: NetworkConfig;
  allowInternetAccess?: boolean;
  lifecycle: { onTimeout: OnTimeout; autoResume: boolean };
  /** -1 never, 0 immediate, N idle seconds. */
  timeout: number;
  /** ISO 8601; absent when the sandbox never times out. */
  endAt?: string;
  startedAt: string;
  volumeMounts: VolumeMount[];
  terminateReason?: TerminateReason;
}

export interface ListSandboxesQuery {
  /** Comma-separated states (running, paused); default both. */
  state?: string;
  /** `k=v&k2=v2`, URL-encoded pairs as E2B sends them. */
  metadata?: string;
  template?: string;
  limit?: number;
  nextToken?: string;
  /** By start time: `desc` (newest first, the default) or `asc`. */
  order?: string;
  /** ISO 8601 timestamps; started at or after, at or before. */
  startedAfter?: string;
  startedBefore?: string;
}

export interface SandboxPage {
  sandboxes: SandboxRecord[];
  nextToken?: string;
  /** How many sandboxes run now, whatever the filters (E2B's X-Total-Running). */
  totalRunning: number;
}

/** A range of unix seconds for metrics, as numbers or as the query text; either end open. */
export interface MetricsRange {
  start?: number | string;
  end?: number | string;
}

export interface ConnectResult {
  /** True when the sandbox was paused and this call resumed it (E2B answers 201 then). */
  resumed: boolean;
  sandbox: SandboxRecord;
}

/** A sandbox's files captured for new sandboxes to start from (docs/api.md, "Snapshots"). */
export interface SnapshotRecord {
  snapshotId: string;
  /** The name given at capture; a later snapshot given the same name takes it over. */
  name?: string;
  /** The sandbox it was taken from, and that sandbox's template. */
  sandboxId: string;
  templateId: string;
  /** What it holds: 'filesystem' on gVisor (files, not memory or processes); 'memory' on microvm (files, memory and processes). */
  contents: 'filesystem' | 'memory';
  /** Bytes the captured layer takes. */
  sizeBytes: number;
  nodeId: string;
  createdAt: string;
}

export interface CreateSnapshotInput {
  name?: string;
}

export interface ListSnapshotsQuery {
  sandboxId?: string;
  /** A snapshot id or name. */
  name?: string;
  limit?: number;
  nextToken?: string;
}

export interface SnapshotPage {
  snapshots: SnapshotRecord[];
  nextToken?: string;
}

export interface ForkInput {
  /** How many sandboxes (1 to MAX_FORK_COUNT). */
  count?: number;
  /** Their idle timeout in seconds (the origin's create default when absent). */
  timeout?: number;
}

/** The most sandboxes one fork makes. */
export const MAX_FORK_COUNT = 10;

/** One fork's outcome: the sandbox, or why it did not start (E2B's SandboxForkResult). */
export interface ForkResult {
  sandbox?: SandboxRecord;
  error?: { code: number; message: string };
}

export interface NodeRecord {
  nodeId: string;
  address: string;
  /** The node's default runtime. */
  runtime: string;
  /** Every runtime it offers, the default first. */
  runtimes: RuntimeKind[];
  pauseKinds: PauseKind[];
  /** draining: it takes no new sandboxes (svc node drain; docs/cluster.md). */
  status: 'ready' | 'draining' | 'unreachable';
  capacity: { cpuCount: number; memoryMB: number };
  usage: { running: number; paused: number; usedMemoryMB: number; memory?: NodeLoad };
  pausedResourceReleaseRatio: number;
  labels: Record<string, string>;
  version: string;
  lastHeartbeatAt: string;
}

/**
 * A drain's course: running while its master goes over the node's sandboxes; done when it has;
 * stopped when the node was undrained first; interrupted when the master running it stopped.
 */
export type DrainState = 'running' | 'done' | 'stopped' | 'interrupted';

/** The latest `svc node drain` of a node (POST|GET /v1/nodes/:id/drain; docs/cluster.md). */
export interface DrainStatus {
  node: NodeRecord;
  state: DrainState;
  /** The node's sandboxes when the drain started, and how many of them it has yet to go over. */
  total: number;
  remaining: number;
  /** Running sandboxes paused, stored and resumed on another node. */
  moved: string[];
  /** Paused sandboxes whose state is now in the artifact store: they resume on another node. */
  stored: string[];
  /** What could not be moved, and why (drain again once it is mended). */
  failed: Array<{ sandboxId: string; message: string }>;
  startedAt: string;
  finishedAt?: string;
}

/** An id as a path segment; one that is not valid Unicode (a lone surrogate from a JSON body) cannot name anything. */
function seg(id: string): string {
  try {
    return encodeURIComponent(id);
  } catch {
    throw badRequest('the id is not valid Unicode');
  }
}

export class MasterClient {
  readonly http: JsonClient;
  constructor(private readonly baseUrl: string, private readonly opts: { timeoutMs?: number; headers?: Record<string, string> } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 120_000, ...(opts.headers ? { headers: opts.headers } : {}) });
  }
  /** The same client, sending these headers too (the gateway's team header, docs/security.md). */
  with(headers: Record<string, string>): MasterClient {
    return Object.keys(headers).length ? new MasterClient(this.baseUrl, { ...this.opts, headers: { ...this.opts.headers, ...headers } }) : this;
  }
  createSandbox(input: CreateSandboxInput) { return this.http.post<SandboxRecord>('/v1/sandboxes', input); }
  listSandboxes(q: ListSandboxesQuery) { return this.http.get<SandboxPage>('/v1/sandboxes', { query: { ...q } }); }
  getSandbox(id: string) { return this.http.get<SandboxRecord>(`/v1/sandboxes/${seg(id)}`); }
  killSandbox(id: string) { return this.http.delete<void>(`/v1/sandboxes/${seg(id)}`); }
  /** memory false: free the memory and keep the files (a filesystem pause). */
  pauseSandbox(id: string, opts: { memory?: boolean } = {}) { return this.http.post<SandboxRecord>(`/v1/sandboxes/${seg(id)}/pause`, opts); }
  /** memory false: a paused sandbox boots again from its files, whatever memory it kept. */
  connectSandbox(id: string, timeout?: number, opts: { memory?: boolean } = {}) {
    return this.http.post<ConnectResult>(`/v1/sandboxes/${seg(id)}/connect`, { timeout, ...opts });
  }
  resumeSandbox(id: string, timeout?: number, opts: { memory?: boolean } = {}) {
    return this.http.post<SandboxRecord>(`/v1/sandboxes/${seg(id)}/resume`, { timeout, ...opts });
  }
  setTimeout(id: string, timeout: number) {
    return this.http.post<SandboxRecord>(`/v1/sandboxes/${seg(id)}/timeout`, { timeout });
  }
  refresh(id: string, duration?: number) {
    return this.http.post<SandboxRecord>(`/v1/sandboxes/${seg(id)}/refresh`, { duration });
  }
  updateNetwork(id: string, update: unknown) { return this.http.put<SandboxRecord>(`/v1/sandboxes/${seg(id)}/network`, update); }
  metrics(id: string, range: MetricsRange = {}) { return this.http.get<SandboxMetrics[]>(`/v1/sandboxes/${seg(id)}/metrics`, { query: { ...range } }); }
  sandboxLogs(id: string, q: SandboxLogsQuery = {}) { return this.http.get<SandboxLogs>(`/v1/sandboxes/${seg(id)}/logs`, { query: { ...q } }); }
  createSnapshot(id: string, input: CreateSnapshotInput = {}) { return this.http.post<SnapshotRecord>(`/v1/sandboxes/${seg(id)}/snapshots`, input); }
  listSnapshots(q: ListSnapshotsQuery = {}) { return this.http.get<SnapshotPage>('/v1/snapshots', { query: { ...q } }); }
  deleteSnapshot(ref: string) { return this.http.delete<void>(`/v1/snapshots/${seg(ref)}`); }
  forkSandbox(id: string, input: ForkInput = {}) { return this.http.post<ForkResult[]>(`/v1/sandboxes/${seg(id)}/fork`, input); }
  listNodes() { return this.http.get<NodeRecord[]>('/v1/nodes'); }
  getNode(id: string) { return this.http.get<NodeRecord>(`/v1/nodes/${seg(id)}`); }
  addNodeLabels(id: string, labels: Record<string, string>) {
    return this.http.post<NodeRecord>(`/v1/nodes/${seg(id)}/labels`, { labels });
  }
  removeNodeLabels(id: string, names: string[]) {
    return this.http.request<NodeRecord>('DELETE', `/v1/nodes/${seg(id)}/labels`, { body: { names } });
  }
  drainNode(id: string) { return this.http.post<DrainStatus>(`/v1/nodes/${seg(id)}/drain`, {}); }
  drainStatus(id: string) { return this.http.get<DrainStatus>(`/v1/nodes/${seg(id)}/drain`); }
  undrainNode(id: string) { return this.http.request<NodeRecord>('DELETE', `/v1/nodes/${seg(id)}/drain`); }
}
