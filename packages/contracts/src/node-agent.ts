/**
 * The node agent's wire contract: what the master sends it and what it answers.
 * Every route but /health and /metrics takes NODE_TOKEN_HEADER when node_agent.token is set (401).
 * Routes (JSON, port 8088 by default):
 *   GET    /health                          → { ok: true, nodeId, tasks }  (tasks: its background work's counts)
 *   GET    /v1/node                         → NodeInfo            (warm pool hits and misses included)
 *   POST   /v1/sandboxes                    → 201 NodeSandbox     (body CreateSandboxOnNode)
 *   GET    /v1/sandboxes                    → NodeSandbox[]       (everything this node runs or holds paused)
 *   GET    /v1/sandboxes/:id                → NodeSandbox | 404
 *   DELETE /v1/sandboxes/:id                → 204 | 200 ExtInfo | 404 (running or paused; never resumes a paused one;
 *                                            200 when volume counts flipped, docs/volumes.md)
 *   POST   /v1/sandboxes/:id/pause          → NodeSandbox (state paused, pauseKind set) | 409 already paused
 *   POST   /v1/sandboxes/:id/resume         → NodeSandbox (state running) | 409 {code:130409} admission refused
 *   PUT    /v1/sandboxes/:id/network        → NodeSandbox | 409 paused   (body NetworkUpdateOnNode: the whole new policy)
 *   GET    /v1/sandboxes/:id/metrics        → SandboxMetrics
 *   POST   /v1/sandboxes/:id/exec           → NDJSON ExecStreamLine… (body ExecOnNode; 409 paused)
 *   GET    /v1/sandboxes/:id/logs           → SandboxLogs         (query SandboxLogsQuery; running or paused)
 *   GET    /v1/ended-sandboxes              → EndedSandbox[]      (sandboxes that stopped on their own, recent first)
 *   POST   /v1/artifacts/:artifactId        → 200 ArtifactOnNode  (body EnsureArtifact; downloads when missing)
 *   DELETE /v1/artifacts/:artifactId        → 204                 (idempotent)
 *   GET    /v1/artifacts                    → ArtifactOnNode[]
 *   GET    /v1/volumes/attachments          → NodeVolumeAttachment[] (node-local volume counts)
 *   *      /v1/volume-content/:volumeId/... → the volume content API (packages/contracts/src/volumes.ts)
 * Errors are `{code, message}` (packages/common/src/errors.ts).
 */
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { errorFromStream, JsonClient, SvcError } from '@svc/common';
import type { ExtInfo } from './volumes.ts';
import { call, pathTo } from './route-table.ts';
import { NODE_AGENT_ROUTES } from './node-agent-routes.ts';
import type {
  CreateSandboxOnNode, EnsureArtifact, ExecOnNode, ExecResultOnNode, ExecStreamLine, NetworkUpdateOnNode, PauseOnNode, ResumeOnNode, SandboxLogsQuery, SnapshotSandboxOnNode,
} from './node-agent-types.ts';

export * from './node-load.ts';
export * from './node-agent-types.ts';
export { NODE_AGENT_ROUTES } from './node-agent-routes.ts';

const R = NODE_AGENT_ROUTES;

/** The node agents' shared token (node_agent.token), on every call but /health and /metrics. */
export const NODE_TOKEN_HEADER = 'x-svc-node-token';

/** Typed client the master uses to drive one node agent. */
export class NodeAgentClient {
  private readonly http: JsonClient;
  /** The headers that authenticate a call of the master's own (the volume content calls it streams itself). */
  readonly authHeaders: Record<string, string>;
  constructor(baseUrl: string, opts: { timeoutMs?: number; token?: string } = {}) {
    this.authHeaders = opts.token ? { [NODE_TOKEN_HEADER]: opts.token } : {};
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 30_000, headers: this.authHeaders });
  }
  get baseUrl() { return this.http.baseUrl; }
  info() { return call(this.http, R.info, {}); }
  createSandbox(req: CreateSandboxOnNode) {
    return call(this.http, R.createSandbox, {}, { body: req, timeoutMs: req.timeoutMs + 2_000 });
  }
  listSandboxes() { return call(this.http, R.listSandboxes, {}); }
  getSandbox(id: string) { return call(this.http, R.getSandbox, { id }); }
  /** The volume count flips the destroy made ({} when none). */
  async deleteSandbox(id: string, timeoutMs?: number): Promise<ExtInfo> {
    return (await call(this.http, R.deleteSandbox, { id }, { timeoutMs })) ?? {};
  }
  updateNetwork(id: string, update: NetworkUpdateOnNode) { return call(this.http, R.updateNetwork, { id }, { body: update }); }
  pauseSandbox(id: string, req: PauseOnNode = {}) { return call(this.http, R.pauseSandbox, { id }, { body: req }); }
  resumeSandbox(id: string, req: ResumeOnNode = {}) { return call(this.http, R.resumeSandbox, { id }, { body: req, timeoutMs: 120_000 }); }
  metrics(id: string) { return call(this.http, R.metrics, { id }); }
  sandboxLogs(id: string, q: SandboxLogsQuery = {}) { return call(this.http, R.sandboxLogs, { id }, { query: { ...q } }); }
  snapshotSandbox(id: string, req: SnapshotSandboxOnNode) {
    return call(this.http, R.snapshotSandbox, { id }, { body: req, timeoutMs: 600_000 });
  }
  /** Runs a command to its end; `onOutput` gets its output as it comes. */
  async exec(id: string, req: ExecOnNode, onOutput?: (stream: 'stdout' | 'stderr', text: string) => void): Promise<ExecResultOnNode> {
    const path = pathTo(R.exec, { id });
    const res = await this.http.stream(R.exec.method, path, {
      body: Readable.from([JSON.stringify(req)]), headers: { 'content-type': 'application/json' }, timeoutMs: (req.timeoutMs ?? 600_000) + 30_000,
    });
    if ((res.statusCode ?? 500) >= 300) throw await errorFromStream(res);
    for await (const text of createInterface({ input: res, crlfDelay: Infinity })) {
      if (!text) continue;
      const line = JSON.parse(text) as ExecStreamLine;
      if ('result' in line) return line.result;
      if ('error' in line) throw new SvcError(line.error.status, line.error.message);
      if ('stdout' in line) onOutput?.('stdout', line.stdout);
      else onOutput?.('stderr', line.stderr);
    }
    throw new SvcError(502, `POST ${path}: the answer ended before the command's result`);
  }
  listLayers() { return call(this.http, R.listLayers, {}); }
  /** The layer's tar as a Node stream, whatever the status (404 when the node lacks it). */
  layerArchive(id: string) { return this.http.stream(R.layerArchive.method, pathTo(R.layerArchive, { id }), { timeoutMs: 0 }); }
  deleteLayer(id: string) { return call(this.http, R.deleteLayer, { id }); }
  listEndedSandboxes() { return call(this.http, R.endedSandboxes, {}); }
  ensureArtifact(artifactId: string, req: EnsureArtifact, timeoutMs = 600_000) {
    return call(this.http, R.ensureArtifact, { id: artifactId }, { body: req, timeoutMs });
  }
  deleteArtifact(artifactId: string) { return call(this.http, R.deleteArtifact, { id: artifactId }); }
  listArtifacts() { return call(this.http, R.listArtifacts, {}); }
  volumeAttachments() { return call(this.http, R.volumeAttachments, {}); }
}
