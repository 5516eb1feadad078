import type { EgressTunnel } from './egress.ts';
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
import { JsonClient } from '@svc/common';
import { answers, call, type RouteTable, type WireOf } from './route-table.ts';
import { ForkBody, ListSandboxesQuerySchema, ListSnapshotsQuerySchema, MetricsQuery, PauseBody, RefreshBody, SetTimeoutBody, SnapshotBody, WakeBody } from './master-schemas.ts';
import type { NodeLoad, PauseKind, RuntimeKind, SandboxLogs, SandboxLogsQuery, SandboxMetrics } from './node-agent.ts';
import type { OnTimeout, SandboxState, TerminateReason } from './master-internal.ts';

export type { SandboxState, OnTimeout, TerminateReason };

export { MAX_FORK_COUNT, SANDBOX_LIMITS } from './master-schemas.ts';

export interface NetworkConfig {
  allowOut: string[];
  denyOut: string[];
  allowPublicTraffic: boolean;
  /** E2B's maskRequestHost: the Host header the sandbox sees on proxied requests (`${PORT}`: the port). */
  maskRequestHost?: string;
  /** Egress L7 rules, kept for the egress proxy (later issue). */
  rules?: unknown;
  /** E2B's egressProxy: the SOCKS5 proxy the sandbox's outbound TCP goes through (docs/egress.md "Bring your own proxy"); reads never show its password. */
  egressProxy?: EgressTunnel;
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

/**
 * The list's query (ListSandboxesQuerySchema): `state` comma-separated states (running, paused;
 * default both), `metadata` `k=v&k2=v2` URL-encoded pairs as E2B sends them, `order` by start
 * time (`desc`, newest first, the default), `startedAfter`/`startedBefore` ISO 8601.
 */
export type ListSandboxesQuery = WireOf<typeof ListSandboxesQuerySchema>;

export interface SandboxPage {
  sandboxes: SandboxRecord[];
  nextToken?: string;
  /** How many sandboxes run now, whatever the filters (E2B's X-Total-Running). */
  totalRunning: number;
}

/** A range of unix seconds for metrics; either end open. */
export type MetricsRange = WireOf<typeof MetricsQuery>;

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

export type ListSnapshotsQuery = WireOf<typeof ListSnapshotsQuerySchema>;

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

/** The master's gateway-facing routes (route-table.ts): the master registers them, MasterClient calls them. */
export const MASTER_ROUTES = {
  createSandbox: { method: 'POST', path: '/v1/sandboxes', answer: answers<SandboxRecord>() },
  listSandboxes: { method: 'GET', path: '/v1/sandboxes', query: ListSandboxesQuerySchema, answer: answers<SandboxPage>() },
  getSandbox: { method: 'GET', path: '/v1/sandboxes/:id', answer: answers<SandboxRecord>() },
  killSandbox: { method: 'DELETE', path: '/v1/sandboxes/:id', answer: answers<void>() },
  pauseSandbox: { method: 'POST', path: '/v1/sandboxes/:id/pause', body: PauseBody, answer: answers<SandboxRecord>() },
  connectSandbox: { method: 'POST', path: '/v1/sandboxes/:id/connect', body: WakeBody, answer: answers<ConnectResult>() },
  resumeSandbox: { method: 'POST', path: '/v1/sandboxes/:id/resume', body: WakeBody, answer: answers<SandboxRecord>() },
  setTimeout: { method: 'POST', path: '/v1/sandboxes/:id/timeout', body: SetTimeoutBody, answer: answers<SandboxRecord>() },
  refresh: { method: 'POST', path: '/v1/sandboxes/:id/refresh', body: RefreshBody, answer: answers<SandboxRecord>() },
  // E2B's SandboxNetworkUpdateConfig, with its two spellings: checked by the master (create-input.ts).
  updateNetwork: { method: 'PUT', path: '/v1/sandboxes/:id/network', answer: answers<SandboxRecord>() },
  metrics: { method: 'GET', path: '/v1/sandboxes/:id/metrics', query: MetricsQuery, answer: answers<SandboxMetrics[]>() },
  sandboxLogs: { method: 'GET', path: '/v1/sandboxes/:id/logs', answer: answers<SandboxLogs>() },
  createSnapshot: { method: 'POST', path: '/v1/sandboxes/:id/snapshots', body: SnapshotBody, answer: answers<SnapshotRecord>() },
  forkSandbox: { method: 'POST', path: '/v1/sandboxes/:id/fork', body: ForkBody, answer: answers<ForkResult[]>() },
  listSnapshots: { method: 'GET', path: '/v1/snapshots', query: ListSnapshotsQuerySchema, answer: answers<SnapshotPage>() },
  deleteSnapshot: { method: 'DELETE', path: '/v1/snapshots/:id', answer: answers<void>() },
  listNodes: { method: 'GET', path: '/v1/nodes', answer: answers<NodeRecord[]>() },
  getNode: { method: 'GET', path: '/v1/nodes/:id', answer: answers<NodeRecord>() },
  addNodeLabels: { method: 'POST', path: '/v1/nodes/:id/labels', answer: answers<NodeRecord>() },
  removeNodeLabels: { method: 'DELETE', path: '/v1/nodes/:id/labels', answer: answers<NodeRecord>() },
  drainNode: { method: 'POST', path: '/v1/nodes/:id/drain', answer: answers<DrainStatus>() },
  drainStatus: { method: 'GET', path: '/v1/nodes/:id/drain', answer: answers<DrainStatus>() },
  undrainNode: { method: 'DELETE', path: '/v1/nodes/:id/drain', answer: answers<NodeRecord>() },
} as const satisfies RouteTable;

const R = MASTER_ROUTES;

export class MasterClient {
  readonly http: JsonClient;
  constructor(private readonly baseUrl: string, private readonly opts: { timeoutMs?: number; headers?: Record<string, string> } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 120_000, ...(opts.headers ? { headers: opts.headers } : {}) });
  }
  /** The same client, sending these headers too (the gateway's team header, docs/security.md). */
  with(headers: Record<string, string>): MasterClient {
    return Object.keys(headers).length ? new MasterClient(this.baseUrl, { ...this.opts, headers: { ...this.opts.headers, ...headers } }) : this;
  }
  createSandbox(input: CreateSandboxInput) { return call(this.http, R.createSandbox, {}, { body: input }); }
  listSandboxes(q: ListSandboxesQuery) { return call(this.http, R.listSandboxes, {}, { query: q }); }
  getSandbox(id: string) { return call(this.http, R.getSandbox, { id }); }
  killSandbox(id: string) { return call(this.http, R.killSandbox, { id }); }
  /** memory false: free the memory and keep the files (a filesystem pause). */
  pauseSandbox(id: string, opts: { memory?: boolean } = {}) { return call(this.http, R.pauseSandbox, { id }, { body: opts }); }
  /** memory false: a paused sandbox boots again from its files, whatever memory it kept. */
  connectSandbox(id: string, timeout?: number, opts: { memory?: boolean } = {}) {
    return call(this.http, R.connectSandbox, { id }, { body: { timeout, ...opts } });
  }
  resumeSandbox(id: string, timeout?: number, opts: { memory?: boolean } = {}) {
    return call(this.http, R.resumeSandbox, { id }, { body: { timeout, ...opts } });
  }
  setTimeout(id: string, timeout: number) { return call(this.http, R.setTimeout, { id }, { body: { timeout } }); }
  refresh(id: string, duration?: number) { return call(this.http, R.refresh, { id }, { body: { duration } }); }
  updateNetwork(id: string, update: unknown) { return call(this.http, R.updateNetwork, { id }, { body: update }); }
  metrics(id: string, range: MetricsRange = {}) { return call(this.http, R.metrics, { id }, { query: range }); }
  sandboxLogs(id: string, q: SandboxLogsQuery = {}) { return call(this.http, R.sandboxLogs, { id }, { query: { ...q } }); }
  createSnapshot(id: string, input: CreateSnapshotInput = {}) { return call(this.http, R.createSnapshot, { id }, { body: input }); }
  listSnapshots(q: ListSnapshotsQuery = {}) { return call(this.http, R.listSnapshots, {}, { query: q }); }
  deleteSnapshot(ref: string) { return call(this.http, R.deleteSnapshot, { id: ref }); }
  forkSandbox(id: string, input: ForkInput = {}) { return call(this.http, R.forkSandbox, { id }, { body: input }); }
  listNodes() { return call(this.http, R.listNodes, {}); }
  getNode(id: string) { return call(this.http, R.getNode, { id }); }
  addNodeLabels(id: string, labels: Record<string, string>) { return call(this.http, R.addNodeLabels, { id }, { body: { labels } }); }
  removeNodeLabels(id: string, names: string[]) { return call(this.http, R.removeNodeLabels, { id }, { body: { names } }); }
  drainNode(id: string) { return call(this.http, R.drainNode, { id }, { body: {} }); }
  drainStatus(id: string) { return call(this.http, R.drainStatus, { id }); }
  undrainNode(id: string) { return call(this.http, R.undrainNode, { id }); }
}
