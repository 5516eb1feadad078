/**
 * The master's internal routes, called by the other components (never by users).
 * They must stay on cluster-internal addresses (loopback in the one-host install).
 *
 *   GET  /notify/health                              → { ok: true, damagedSandboxRows, tasks } (no database access; rows a list skipped; background tasks' counts)
 *   GET  /metrics                                    → the process's Prometheus metrics (text; a call made for a team is a 404)
 *   POST /internal/v1/nodes/register                 → RegisterNodeResult   (body RegisterNode)
 *   POST /internal/v1/nodes/:nodeId/heartbeat        → 204 | 404 (unknown: register again)
 *   GET  /internal/v1/sandboxes/:id/route            → SandboxRoute | 404
 *   POST /internal/v1/file-urls/route                → SandboxRoute | 401 (body SignedFileRequest: whose token signed it)
 *   POST /internal/v1/activity                       → 204  (body ActivityReport: resets idle clocks)
 *   GET  /internal/v1/lifecycle/due                  → DueSandbox[] (idle deadline reached)
 *   POST /internal/v1/sandboxes/:id/pause            → SandboxRoute (body { reason })
 *   POST /internal/v1/sandboxes/:id/resume           → SandboxRoute (body { reason })
 *   POST /internal/v1/sandboxes/:id/kill             → 204          (body { reason })
 *   GET  /internal/v1/platform-addresses             → PlatformAddresses (node agents, every 30 s: what a sandbox's own packets never reach)
 *   POST /internal/template/jobs/:jobId/status       → 204  (template center callback, see @svc/template-center api)
 *   GET  /svc/template/artifact/download?artifact_id → the ext4 image (node agents pull through the master)
 *   GET  /internal/v1/layers/:layerId                → a snapshot layer's tar from the artifact store (node agents, for a create from a snapshot)
 */
import { JsonClient, type TaskStats } from '@svc/common';
import type { SignedFileRequest } from '@svc/common/envd-signature';
import type { EndedSandbox, NodeInfo, NodeLoad, PauseKind, RuntimeKind } from './node-agent.ts';
import type { PlatformAddresses } from './egress.ts';
import { answers, call, type RouteTable } from './route-table.ts';
import { ActivityBody, HeartbeatBody, LifecycleBody, SignedFileRequestBody } from './master-schemas.ts';
import { METRICS_ROUTE } from './metrics-route.ts';
import { clusterHeaders } from './cluster-token.ts';

/** Every state a sandbox can be in, as the master records it. */
export type SandboxState = 'running' | 'pausing' | 'paused' | 'resuming' | 'killing' | 'terminated';
/**
 * oom: the sandbox used more memory than the runtime could hold and the host stopped it.
 * pids_limit: its processes and threads took more host tasks than its host allows a sandbox,
 * and it stopped (docs/decisions.md, "Host tasks of a gVisor sandbox").
 * node_lost: its node stopped answering for longer than master.node_lost_after_sec (docs/cluster.md).
 */
export type TerminateReason = 'killed' | 'timeout' | 'failed' | 'oom' | 'pids_limit' | 'node_lost';
export type OnTimeout = 'kill' | 'pause';

/** What a node agent says of itself when it registers: its NodeInfo without the live counts. */
export type RegisterNode = Omit<NodeInfo, 'sandboxes' | 'warmPool'>;

export interface RegisterNodeResult {
  nodeId: string;
  heartbeatIntervalMs: number;
}

export interface NodeHeartbeat {
  sandboxes: { running: number; paused: number };
  /** Memory the node counts as used by sandboxes, after the release ratio. */
  usedMemoryMB: number;
  /** Sandboxes that stopped on their own lately, with why (repeated over a few beats). */
  ended?: EndedSandbox[];
  /** Measured memory: what admission goes by (absent from older node agents: nominal only). */
  memory?: NodeLoad;
}

/** What the data-plane proxy needs to route and gate a request. */
export interface SandboxRoute {
  sandboxId: string;
  state: SandboxState;
  terminateReason?: TerminateReason;
  nodeId: string;
  /** Sandbox IPv4 address; the proxy connects to `<address>:<port>`. */
  address: string;
  envdPort: number;
  autoResume: boolean;
  /** Present when the sandbox requires a traffic access token (allow_public_traffic=false). */
  trafficAccessToken?: string;
  /** Present when envd's port needs the envd access token (every sandbox but an explicit secure=false). */
  envdAccessToken?: string;
  /** The Host header requests to the sandbox carry instead of the client's (`${PORT}`: the port). */
  maskRequestHost?: string;
}

export interface ActivityReport {
  sandboxIds: string[];
}

export interface DueSandbox {
  sandboxId: string;
  state: SandboxState;
  onTimeout: OnTimeout;
  endAt: string;
}

/** drain: a node drain paused the sandbox and moved it (docs/cluster.md). */
export type LifecycleReason = 'api' | 'timeout' | 'auto' | 'connect' | 'drain';

/**
 * The master's internal routes (route-table.ts) that MasterInternalClient calls: the master
 * registers them from here. The egress proxy's policy load (egress.ts), the template center's
 * callback, the key, secret and identity routes and the downloads have tables of their own
 * beside their clients.
 */
export const MASTER_INTERNAL_ROUTES = {
  health: { method: 'GET', path: '/notify/health', answer: answers<{ ok: boolean; damagedSandboxRows: unknown[]; tasks: Record<string, TaskStats> }>() },
  /** The process's Prometheus metrics; the operator's, as the other operator routes (docs/observability.md). */
  metrics: METRICS_ROUTE,
  registerNode: { method: 'POST', path: '/internal/v1/nodes/register', answer: answers<RegisterNodeResult>() },
  heartbeat: { method: 'POST', path: '/internal/v1/nodes/:id/heartbeat', body: HeartbeatBody, answer: answers<void>() },
  route: { method: 'GET', path: '/internal/v1/sandboxes/:id/route', answer: answers<SandboxRoute>() },
  routeBySignature: { method: 'POST', path: '/internal/v1/file-urls/route', body: SignedFileRequestBody, answer: answers<SandboxRoute>() },
  activity: { method: 'POST', path: '/internal/v1/activity', body: ActivityBody, answer: answers<void>() },
  due: { method: 'GET', path: '/internal/v1/lifecycle/due', answer: answers<DueSandbox[]>() },
  pause: { method: 'POST', path: '/internal/v1/sandboxes/:id/pause', body: LifecycleBody, answer: answers<SandboxRoute>() },
  resume: { method: 'POST', path: '/internal/v1/sandboxes/:id/resume', body: LifecycleBody, answer: answers<SandboxRoute>() },
  kill: { method: 'POST', path: '/internal/v1/sandboxes/:id/kill', body: LifecycleBody, answer: answers<void>() },
  /**
   * Where the platform's components listen, as addresses, and the sandbox pools: the same list
   * the egress proxy reads (MASTER_EGRESS_ROUTES.platformAddresses). Node agents drop a
   * sandbox's own packets to them (docs/cluster.md, "Traffic between components").
   */
  platformAddresses: { method: 'GET', path: '/internal/v1/platform-addresses', answer: answers<PlatformAddresses>() },
} as const satisfies RouteTable;

const R = MASTER_INTERNAL_ROUTES;

export class MasterInternalClient {
  private readonly http: JsonClient;
  /** clusterToken: cluster_token, sent with every call (cluster-token.ts). */
  constructor(baseUrl: string, opts: { timeoutMs?: number; clusterToken?: string } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 30_000, headers: clusterHeaders(opts.clusterToken) });
  }
  get baseUrl() { return this.http.baseUrl; }
  registerNode(req: RegisterNode) { return call(this.http, R.registerNode, {}, { body: req }); }
  heartbeat(nodeId: string, hb: NodeHeartbeat) { return call(this.http, R.heartbeat, { id: nodeId }, { body: hb, timeoutMs: 5_000 }); }
  route(sandboxId: string, timeoutMs = 5_000) { return call(this.http, R.route, { id: sandboxId }, { timeoutMs }); }
  /**
   * The sandbox whose envd access token produced a signed file URL that names no sandbox (the
   * SDK's uploadUrl/downloadUrl in single-URL mode); 401 when none did.
   */
  routeBySignature(req: SignedFileRequest, timeoutMs = 5_000) { return call(this.http, R.routeBySignature, {}, { body: req, timeoutMs }); }
  reportActivity(report: ActivityReport) { return call(this.http, R.activity, {}, { body: report, timeoutMs: 5_000 }); }
  due() { return call(this.http, R.due, {}); }
  pause(sandboxId: string, reason: LifecycleReason) { return call(this.http, R.pause, { id: sandboxId }, { body: { reason } }); }
  resume(sandboxId: string, reason: LifecycleReason) { return call(this.http, R.resume, { id: sandboxId }, { body: { reason } }); }
  kill(sandboxId: string, reason: LifecycleReason) { return call(this.http, R.kill, { id: sandboxId }, { body: { reason } }); }
  platformAddresses(timeoutMs = 10_000) { return call(this.http, R.platformAddresses, {}, { timeoutMs }); }
}
