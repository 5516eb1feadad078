import { answers, type BodyOf, type QueryOf, type RouteTable } from './route-table.ts';
import type {
  ArtifactOnNode, CreateSandboxOnNode, EndedSandbox, EnsureArtifact, ExecOnNode, LayerOnNode, NetworkUpdateOnNode, NodeInfo, NodeSandbox, PauseOnNode, ResumeOnNode,
  SandboxLogs, SandboxLogsQuery, SandboxMetrics, SnapshotSandboxOnNode,
} from './node-agent-types.ts';
import type { TaskStats } from '@svc/common';
import type { ExtInfo, NodeVolumeAttachment } from './volumes.ts';
import * as S from './node-agent-schemas.ts';
import { METRICS_ROUTE } from './metrics-route.ts';

/**
 * The node agent's routes (route-table.ts): its server registers them, NodeAgentClient and the
 * master's fake node agent go through them. The bodies and the logs query are checked against
 * their schemas (node-agent-schemas.ts) before a handler runs. The volume content API under
 * `/v1/volume-content` has its own contract (volumes.ts).
 */
export const NODE_AGENT_ROUTES = {
  health: { method: 'GET', path: '/health', answer: answers<{ ok: boolean; nodeId: string; tasks: Record<string, TaskStats> }>() },
  info: { method: 'GET', path: '/v1/node', answer: answers<NodeInfo>() },
  /** The process's Prometheus metrics (docs/observability.md); `metrics` below is one sandbox's. */
  prometheus: METRICS_ROUTE,
  createSandbox: { method: 'POST', path: '/v1/sandboxes', body: S.CreateSandboxBody, answer: answers<NodeSandbox>() },
  listSandboxes: { method: 'GET', path: '/v1/sandboxes', answer: answers<NodeSandbox[]>() },
  getSandbox: { method: 'GET', path: '/v1/sandboxes/:id', answer: answers<NodeSandbox>() },
  deleteSandbox: { method: 'DELETE', path: '/v1/sandboxes/:id', answer: answers<ExtInfo | undefined>() },
  pauseSandbox: { method: 'POST', path: '/v1/sandboxes/:id/pause', body: S.PauseBody, answer: answers<NodeSandbox>() },
  resumeSandbox: { method: 'POST', path: '/v1/sandboxes/:id/resume', body: S.ResumeBody, answer: answers<NodeSandbox>() },
  updateNetwork: { method: 'PUT', path: '/v1/sandboxes/:id/network', body: S.NetworkUpdateBody, answer: answers<NodeSandbox>() },
  snapshotSandbox: { method: 'POST', path: '/v1/sandboxes/:id/snapshot', body: S.SnapshotBody, answer: answers<LayerOnNode>() },
  metrics: { method: 'GET', path: '/v1/sandboxes/:id/metrics', answer: answers<SandboxMetrics>() },
  exec: { method: 'POST', path: '/v1/sandboxes/:id/exec', body: S.ExecBody },
  sandboxLogs: { method: 'GET', path: '/v1/sandboxes/:id/logs', query: S.SandboxLogsQueryParams, answer: answers<SandboxLogs>() },
  endedSandboxes: { method: 'GET', path: '/v1/ended-sandboxes', answer: answers<EndedSandbox[]>() },
  listLayers: { method: 'GET', path: '/v1/layers', answer: answers<LayerOnNode[]>() },
  layerArchive: { method: 'GET', path: '/v1/layers/:id/archive' },
  deleteLayer: { method: 'DELETE', path: '/v1/layers/:id', answer: answers<void>() },
  listArtifacts: { method: 'GET', path: '/v1/artifacts', answer: answers<ArtifactOnNode[]>() },
  ensureArtifact: { method: 'POST', path: '/v1/artifacts/:id', body: S.EnsureArtifactBody, answer: answers<ArtifactOnNode>() },
  deleteArtifact: { method: 'DELETE', path: '/v1/artifacts/:id', answer: answers<void>() },
  volumeAttachments: { method: 'GET', path: '/v1/volumes/attachments', answer: answers<NodeVolumeAttachment[]>() },
} as const satisfies RouteTable;

/**
 * Compile-time checks that each schema and the interface the rest of the code uses
 * (node-agent-types.ts) describe one body: the same fields of the same types once what the node
 * agent fills in is set aside (a field absent, null or '' is given the agent's own value:
 * node-agent/src/validate.ts), and what the master sends passes the schema (`call` checks that
 * too, but exec streams its answer and does not go through it).
 */
type Filled<T> = T extends undefined | null | '' ? never
  : T extends readonly (infer U)[] ? Filled<U>[]
    : T extends object ? { [K in keyof T]-?: Filled<T[K]> }
      : T;
/** Compiles only when B is assignable to A. */
type Takes<A, B extends A> = B;
type Body<K extends keyof typeof NODE_AGENT_ROUTES> = BodyOf<(typeof NODE_AGENT_ROUTES)[K]>;
type Query<K extends keyof typeof NODE_AGENT_ROUTES> = QueryOf<(typeof NODE_AGENT_ROUTES)[K]>;
type SchemasMatchTheInterfaces = [
  Takes<Body<'createSandbox'>, CreateSandboxOnNode>, Takes<Filled<Body<'createSandbox'>>, Filled<CreateSandboxOnNode>>, Takes<Filled<CreateSandboxOnNode>, Filled<Body<'createSandbox'>>>,
  Takes<Body<'pauseSandbox'>, PauseOnNode>, Takes<Filled<Body<'pauseSandbox'>>, Filled<PauseOnNode>>, Takes<Filled<PauseOnNode>, Filled<Body<'pauseSandbox'>>>,
  Takes<Body<'resumeSandbox'>, ResumeOnNode>, Takes<Filled<Body<'resumeSandbox'>>, Filled<ResumeOnNode>>, Takes<Filled<ResumeOnNode>, Filled<Body<'resumeSandbox'>>>,
  Takes<Body<'snapshotSandbox'>, SnapshotSandboxOnNode>, Takes<Filled<Body<'snapshotSandbox'>>, Filled<SnapshotSandboxOnNode>>, Takes<Filled<SnapshotSandboxOnNode>, Filled<Body<'snapshotSandbox'>>>,
  Takes<Body<'updateNetwork'>, NetworkUpdateOnNode>, Takes<Filled<Body<'updateNetwork'>>, Filled<NetworkUpdateOnNode>>, Takes<Filled<NetworkUpdateOnNode>, Filled<Body<'updateNetwork'>>>,
  Takes<Body<'exec'>, ExecOnNode>, Takes<Filled<Body<'exec'>>, Filled<ExecOnNode>>, Takes<Filled<ExecOnNode>, Filled<Body<'exec'>>>,
  Takes<Body<'ensureArtifact'>, EnsureArtifact>, Takes<Filled<Body<'ensureArtifact'>>, Filled<EnsureArtifact>>, Takes<Filled<EnsureArtifact>, Filled<Body<'ensureArtifact'>>>,
  Takes<Filled<Query<'sandboxLogs'>>, Filled<SandboxLogsQuery>>, Takes<Filled<SandboxLogsQuery>, Filled<Query<'sandboxLogs'>>>,
];
