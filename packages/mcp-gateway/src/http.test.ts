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

test('past the most sessions an initialize is a 429 with a JSON error; a session ended makes room again', async () => {
  const opened = await Promise.all([initialize(), initialize(), initialize(), initialize(), initialize()]);
  assert.deepEqual(opened.map((r) => r.status).sort(), [200, 200, 200, 429, 429]);
  assert.equal(http.sessions(), 3);
  const refused = await fetch(url, {
    method: 'POST', headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  });
  assert.equal(refused.status, 429);
  assert.match(refused.headers.get('content-type') ?? '', /^application\/json/);
  const body = await refused.json() as { error: { message: string } };
  assert.match(body.error.message, /^Too many sessions: 3 are open, the most this gateway keeps; end one \(DELETE \/mcp/);

  const id = opened.find((r) => r.status === 200)!.headers.get('mcp-session-id')!;
  const ended = await fetch(url, { method: 'DELETE', headers: { ...headers, 'mcp-session-id': id } });
  assert.equal(ended.status, 200);
  assert.equal(http.sessions(), 2);
  assert.equal((await initialize()).status, 200);
  assert.equal(http.sessions(), 3);
});
