/**
 * The master's internal routes, called by the other components (never by users).
 * They must stay on cluster-internal addresses (loopback in the one-host install).
 *
 *   GET  /notify/health                              → { ok: true, damagedSandboxRows, tasks } (no database access; rows a list skipped; background tasks' counts)
 *   POST /internal/v1/nodes/register                 → RegisterNodeResult   (body RegisterNode)
 *   POST /internal/v1/nodes/:nodeId/heartbeat        → 204 | 404 (unknown: register again)
 *   GET  /internal/v1/sandboxes/:id/route            → SandboxRoute | 404
 *   POST /internal/v1/file-urls/route                → SandboxRoute | 401 (body SignedFileRequest: whose token signed it)
 *   POST /internal/v1/activity                       → 204  (body ActivityReport: resets idle clocks)
 *   GET  /internal/v1/lifecycle/due                  → DueSandbox[] (idle deadline reached)
 *   POST /internal/v1/sandboxes/:id/pause            → SandboxRoute (body { reason })
 *   POST /internal/v1/sandboxes/:id/resume           → SandboxRoute (body { reason })
 *   POST /internal/v1/sandboxes/:id/kill             → 204          (body { reason })
 *   POST /internal/template/jobs/:jobId/status       → 204  (template center callback, see @svc/template-center api)
 *   GET  /svc/template/artifact/download?artifact_id → the ext4 image (node agents pull through the master)
 *   GET  /internal/v1/layers/:layerId                → a snapshot layer's tar from the artifact store (node agents, for a create from a snapshot)
 */
import { JsonClient } from '@svc/common';
import type { SignedFileRequest } from '@svc/common/envd-signature';
import type { EndedSandbox, NodeInfo, NodeLoad, PauseKind, RuntimeKind } from './node-agent.ts';

/** Every state a sandbox can be in, as the master records it. */
export type SandboxState = 'running' | 'pausing' | 'paused' | 'resuming' | 'killing' | 'terminated';
/**
 * oom: the sandbox used more memory than the runtime could hold and the host stopped it.
 * node_lost: its node stopped answering for longer than master.node_lost_after_sec (docs/cluster.md).
 */
export type TerminateReason = 'killed' | 'timeout' | 'failed' | 'oom' | 'node_lost';
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

export class MasterInternalClient {
  private readonly http: JsonClient;
  constructor(baseUrl: string, opts: { timeoutMs?: number } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 30_000 });
  }
  get baseUrl() { return this.http.baseUrl; }
  registerNode(req: RegisterNode) { return this.http.post<RegisterNodeResult>('/internal/v1/nodes/register', req); }
  heartbeat(nodeId: string, hb: NodeHeartbeat) {
    return this.http.post<void>(`/internal/v1/nodes/${encodeURIComponent(nodeId)}/heartbeat`, hb, { timeoutMs: 5_000 });
  }
  route(sandboxId: string, timeoutMs = 5_000) {
    return this.http.get<SandboxRoute>(`/internal/v1/sandboxes/${encodeURIComponent(sandboxId)}/route`, { timeoutMs });
  }
  /**
   * The sandbox whose envd access token produced a signed file URL that names no sandbox (the
   * SDK's uploadUrl/downloadUrl in single-URL mode); 401 when none did.
   */
  routeBySignature(req: SignedFileRequest, timeoutMs = 5_000) {
    return this.http.post<SandboxRoute>('/internal/v1/file-urls/route', req, { timeoutMs });
  }
  reportActivity(report: ActivityReport) { return this.http.post<void>('/internal/v1/activity', report, { timeoutMs: 5_000 }); }
  due() { return this.http.get<DueSandbox[]>('/internal/v1/lifecycle/due'); }
  pause(sandboxId: string, reason: LifecycleReason) {
    return this.http.post<SandboxRoute>(`/internal/v1/sandboxes/${encodeURIComponent(sandboxId)}/pause`, { reason });
  }
  resume(sandboxId: string, reason: LifecycleReason) {
    return this.http.post<SandboxRoute>(`/internal/v1/sandboxes/${encodeURIComponent(sandboxId)}/resume`, { reason });
  }
  kill(sandboxId: string, reason: LifecycleReason) {
    return this.http.post<void>(`/internal/v1/sandboxes/${encodeURIComponent(sandboxId)}/kill`, { reason });
  }
}
