/**
 * The gateway's HTTP front on its own (a bare MCP Server per session): its bound on open sessions.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { startHttp, type GatewayHttp } from './http.ts';
import { freePort } from './test-support.ts';

const TOKEN = 'http-token';
let http: GatewayHttp;
let url: string;

before(async () => {
  const port = await freePort();
  http = await startHttp({
    host: '127.0.0.1', port, token: TOKEN, log: () => {}, maxSessions: 3,
    newServer: () => new Server({ name: 'test', version: '1.0.0' }, { capabilities: {} }),
  });
  url = `http://127.0.0.1:${port}/mcp`;
});
after(() => http.close());

const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

async function initialize(): Promise<Response> {
  const res = await fetch(url, {
    method: 'POST', headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  });
  await res.text();
  return res;
}

const sessionOf = (res: Response) => res.headers.get('mcp-session-id')!;

async function ping(id: string): Promise<number> {
  const res = await fetch(url, { method: 'POST', headers: { ...headers, 'mcp-session-id': id }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) });
  await res.text();
  return res.status;
}

// Clients that open a session per turn and never DELETE it were locked out by a 429 at the bound
// for up to an hour: at the bound the least recently used session is closed instead.
test('past the most sessions an initialize closes the least recently used session and opens', async () => {
  const opened: Response[] = [];
  for (let i = 0; i < 5; i++) {
    opened.push(await initialize());
    assert.ok(http.sessions() <= 3, `${http.sessions()} sessions open, over the bound of 3`);
  }
  assert.deepEqual(opened.map((r) => r.status), [200, 200, 200, 200, 200]);
  assert.equal(http.sessions(), 3);
  const ids = opened.map(sessionOf);
  assert.equal(await ping(ids[0]), 404, 'the oldest session was closed');
  assert.equal(await ping(ids[1]), 404, 'the second oldest session was closed');
  for (const id of ids.slice(2)) assert.equal(await ping(id), 200);

  // a request makes a session the most recently used: ids[2] was used before ids[3], ids[4] again
  assert.equal(await ping(ids[2]), 200);
  const next = await initialize();
  assert.equal(next.status, 200);
  assert.equal(await ping(ids[3]), 404, 'the least recently used session went, not the oldest opened');
  assert.equal(await ping(ids[2]), 200);
  assert.equal(http.sessions(), 3);

  // a session ended by DELETE leaves room without closing another
  const ended = await fetch(url, { method: 'DELETE', headers: { ...headers, 'mcp-session-id': ids[4] } });
  assert.equal(ended.status, 200);
  assert.equal(http.sessions(), 2);
  assert.equal((await initialize()).status, 200);
  assert.equal(await ping(ids[2]), 200);
  assert.equal(await ping(sessionOf(next)), 200);
  assert.equal(http.sessions(), 3);
});

test('initializes at once stay within the bound', async () => {
  const opened = await Promise.all([initialize(), initialize(), initialize(), initialize(), initialize()]);
  assert.ok(opened.some((r) => r.status === 200));
  for (const r of opened) assert.ok(r.status === 200 || r.status === 429, `status ${r.status}`);
  assert.ok(http.sessions() <= 3, `${http.sessions()} sessions open, over the bound of 3`);
});
