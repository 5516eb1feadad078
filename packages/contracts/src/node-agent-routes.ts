import type { RouteTable } from './route-table.ts';

/**
 * The node agent's routes (route-table.ts): its server registers them, NodeAgentClient and the
 * master's fake node agent go through them. The volume content API under `/v1/volume-content`
 * has its own contract (volumes.ts).
 */
export const NODE_AGENT_ROUTES = {
  health: { method: 'GET', path: '/health' },
  info: { method: 'GET', path: '/v1/node' },
  createSandbox: { method: 'POST', path: '/v1/sandboxes' },
  listSandboxes: { method: 'GET', path: '/v1/sandboxes' },
  getSandbox: { method: 'GET', path: '/v1/sandboxes/:id' },
  deleteSandbox: { method: 'DELETE', path: '/v1/sandboxes/:id' },
  pauseSandbox: { method: 'POST', path: '/v1/sandboxes/:id/pause' },
  resumeSandbox: { method: 'POST', path: '/v1/sandboxes/:id/resume' },
  updateNetwork: { method: 'PUT', path: '/v1/sandboxes/:id/network' },
  snapshotSandbox: { method: 'POST', path: '/v1/sandboxes/:id/snapshot' },
  metrics: { method: 'GET', path: '/v1/sandboxes/:id/metrics' },
  exec: { method: 'POST', path: '/v1/sandboxes/:id/exec' },
  sandboxLogs: { method: 'GET', path: '/v1/sandboxes/:id/logs' },
  endedSandboxes: { method: 'GET', path: '/v1/ended-sandboxes' },
  listLayers: { method: 'GET', path: '/v1/layers' },
  layerArchive: { method: 'GET', path: '/v1/layers/:id/archive' },
  deleteLayer: { method: 'DELETE', path: '/v1/layers/:id' },
  listArtifacts: { method: 'GET', path: '/v1/artifacts' },
  ensureArtifact: { method: 'POST', path: '/v1/artifacts/:id' },
  deleteArtifact: { method: 'DELETE', path: '/v1/artifacts/:id' },
  volumeAttachments: { method: 'GET', path: '/v1/volumes/attachments' },
} as const satisfies RouteTable;
