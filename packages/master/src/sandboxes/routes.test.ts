/**
 * The master's sandbox and internal routes refuse a body or query their schema does not allow
 * with a 400 that names the field, before the service sees it (master-schemas.ts), and take
 * what the gateway and the other components send.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '../testing/master-over-fake-node.ts';

let h: MasterOverFakeNode;
let sandboxId: string;
before(async () => {
  h = await startMasterOverFakeNode();
  sandboxId = (await h.master.sandboxes.create({
    template: 'base', onTimeout: 'kill', autoResume: false, metadata: {}, envVars: {}, secure: false,
    network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [],
  })).sandboxId;
});
after(async () => { await h?.close(); });

async function send(method: string, path: string, body?: unknown): Promise<{ status: number; message: string }> {
  const res = await fetch(`${h.master.url}${path}`, {
    method,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const text = await res.text();
  return { status: res.status, message: text ? (JSON.parse(text) as { message?: string }).message ?? '' : '' };
}

test('bad bodies and queries are a 400 naming the field', async () => {
  const id = sandboxId;
  const cases: Array<[string, string, unknown, RegExp]> = [
    ['POST', `/v1/sandboxes/${id}/timeout`, { timeout: 'x' }, /^timeout must be integer$/],
    ['POST', `/v1/sandboxes/${id}/timeout`, {}, /^timeout is required$/],
    ['POST', `/v1/sandboxes/${id}/timeout`, undefined, /^timeout is required$/],
    ['POST', `/v1/sandboxes/${id}/timeout`, { timeout: -2 }, /^timeout must be >= -1$/],
    ['POST', `/v1/sandboxes/${id}/timeout`, { timeout: 2 ** 31 }, /^timeout must be <= 2147483647$/],
    ['POST', `/v1/sandboxes/${id}/timeout`, '[1]', /^request body must be object$/],
    ['POST', `/v1/sandboxes/${id}/refresh`, { duration: -1 }, /^duration must be >= 0$/],
    ['POST', `/v1/sandboxes/${id}/connect`, { timeout: 1.5 }, /^timeout must be integer or null$/],
    ['POST', `/v1/sandboxes/${id}/pause`, { memory: 'yes' }, /^memory must be boolean or null$/],
    ['POST', `/v1/sandboxes/${id}/fork`, { count: 11 }, /^count must be <= 10$/],
    ['GET', `/v1/sandboxes/${id}/metrics?start=yesterday`, undefined, /^query parameter start must be integer$/],
    ['GET', '/v1/sandboxes?limit=0', undefined, /^query parameter limit must be >= 1$/],
    ['GET', '/v1/sandboxes?order=sideways', undefined, /^query parameter order must be one of asc, desc$/],
    ['GET', '/v1/sandboxes?template=a&template=b', undefined, /^query parameter template must be string$/],
    ['GET', '/v1/snapshots?limit=5000', undefined, /^query parameter limit must be <= 1000$/],
    ['POST', '/internal/v1/activity', { sandboxIds: 'abc' }, /^sandboxIds must be array$/],
    ['POST', '/internal/v1/activity', { sandboxIds: [1] }, /^sandboxIds\[0\] must be string$/],
    ['POST', `/internal/v1/sandboxes/${id}/pause`, {}, /^reason is required$/],
    ['POST', `/internal/v1/sandboxes/${id}/kill`, { reason: 'whim' }, /^reason must be one of api, timeout, auto, connect, drain$/],
    ['POST', '/internal/v1/file-urls/route', { path: 1, operation: 'read' }, /^path must be string$/],
    ['POST', '/internal/v1/file-urls/route', { path: '/a', operation: 'delete' }, /^operation must be one of read, write$/],
    ['POST', '/internal/v1/nodes/n1/heartbeat', { sandboxes: { running: -1, paused: 0 }, usedMemoryMB: 0 }, /^sandboxes\.running must be >= 0$/],
    ['POST', '/internal/v1/nodes/n1/heartbeat', { usedMemoryMB: 0 }, /^sandboxes is required$/],
    ['GET', '/internal/v1/egress/policies', undefined, /^query parameter nodeId is required$/],
  ];
  for (const [method, path, body, message] of cases) {
    const r = await send(method, path, body);
    assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${r.message}`);
    assert.match(r.message, message, `${method} ${path} ${JSON.stringify(body)}`);
  }
  // Nothing of that reached the sandbox.
  assert.equal((await h.master.sandboxes.get(id)).state, 'running');
});

test('what the gateway and the components send is taken', async () => {
  const id = sandboxId;
  assert.equal((await send('POST', `/v1/sandboxes/${id}/timeout`, { timeout: 600 })).status, 200);
  assert.equal((await send('POST', `/v1/sandboxes/${id}/refresh`, { duration: null })).status, 200);
  assert.equal((await send('POST', `/v1/sandboxes/${id}/refresh`, undefined)).status, 200, 'no body is an empty one');
  assert.equal((await send('GET', `/v1/sandboxes/${id}/metrics?start=0&end=99999999999`)).status, 200);
  assert.equal((await send('GET', '/v1/sandboxes?state=running&state=paused&limit=5&order=asc')).status, 200);
  assert.equal((await send('POST', '/internal/v1/activity', { sandboxIds: [id, 'unknown'] })).status, 204);
  // A heartbeat may carry fields a newer node agent adds.
  assert.equal((await send('POST', '/internal/v1/nodes/n1/heartbeat', { sandboxes: { running: 1, paused: 0 }, usedMemoryMB: 256, gpu: {} })).status, 204);
  const unsigned = await send('POST', '/internal/v1/file-urls/route', { path: '/a', operation: 'read' });
  assert.equal(unsigned.status, 401, 'a URL without a signature matches no sandbox');
  assert.equal((await send('POST', `/internal/v1/sandboxes/${id}/kill`, { reason: 'api' })).status, 204);
});
