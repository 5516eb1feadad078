/**
 * The fake API's node routes (fake-api.ts): labels, and a drain that moves one sandbox,
 * 'sbx-moved', and is seen done at the first status asked after it starts.
 */
import { fakeError as err, type FakeOn } from './fake-routes.ts';

export interface NodeRow {
  nodeId: string;
  address: string;
  runtime: string;
  status: 'ready' | 'draining' | 'unreachable';
  usage: { running: number; paused: number; usedMemoryMB: number };
  labels: Record<string, string>;
  version: string;
}

export function serveFakeNodes(on: FakeOn, nodes: Map<string, NodeRow>): void {
  on('GET', '/nodes', async () => [...nodes.values()]);
  on('POST', '/nodes/{id}/labels', async (req, reply) => {
    const n = nodes.get((req.params as { id: string }).id);
    if (!n) return err(reply, 404, 'node not found');
    Object.assign(n.labels, (req.body as { labels?: Record<string, string> } | undefined)?.labels ?? {});
    return n;
  });
  on('DELETE', '/nodes/{id}/labels', async (req, reply) => {
    const n = nodes.get((req.params as { id: string }).id);
    if (!n) return err(reply, 404, 'node not found');
    for (const name of (req.body as { names?: string[] } | undefined)?.names ?? []) delete n.labels[name];
    return n;
  });
  const drains = new Map<string, { state: string; total: number; remaining: number; moved: string[]; stored: string[]; failed: unknown[]; startedAt: string; finishedAt?: string }>();
  on('POST', '/nodes/{id}/drain', async (req, reply) => {
    const n = nodes.get((req.params as { id: string }).id);
    if (!n) return err(reply, 404, 'node not found');
    n.status = 'draining';
    const drain = { state: 'running', total: 1, remaining: 1, moved: [], stored: [], failed: [], startedAt: new Date().toISOString() };
    drains.set(n.nodeId, drain);
    return reply.status(202).send({ node: n, ...drain });
  });
  on('GET', '/nodes/{id}/drain', async (req, reply) => {
    const n = nodes.get((req.params as { id: string }).id);
    const drain = n && drains.get(n.nodeId);
    if (!n || !drain) return err(reply, 404, n ? `node ${n.nodeId} has no drain on record` : 'node not found');
    if (drain.state === 'running') Object.assign(drain, { state: 'done', remaining: 0, moved: ['sbx-moved'], finishedAt: new Date().toISOString() });
    return { node: n, ...drain };
  });
  on('DELETE', '/nodes/{id}/drain', async (req, reply) => {
    const n = nodes.get((req.params as { id: string }).id);
    if (!n) return err(reply, 404, 'node not found');
    n.status = 'ready';
    return n;
  });
}
