/**
 * The streamable HTTP side (McpHttpSessions) on a real loopback listener, with a stand-in for the
 * API's authentication: each key names its team. Sessions are their opener team's, DELETE and the
 * idle timeout end them (and kill their code sandbox), the number per team is bounded.
 */
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpHttpSessions, type McpHttpOptions } from './http.ts';
import { memoryLog, textOf, type ToolResult } from './test-support/client.ts';
import { startFakePlatform, type FakePlatform } from './test-support/fake-platform.ts';

const TEAMS: Record<string, string> = { 'key-a': 'team-a', 'key-a2': 'team-a', 'key-b': 'team-b' };
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

let fake: FakePlatform;
const servers: Array<{ server: Server; sessions: McpHttpSessions }> = [];
const clients: Client[] = [];

before(async () => { fake = await startFakePlatform({ checkKey: false }); });
after(async () => {
  for (const c of clients) await c.close();
  for (const s of servers) {
    await s.sessions.close();
    s.server.closeAllConnections();
    await new Promise<void>((r) => s.server.close(() => r()));
  }
  await fake.close();
});

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString();
  return text ? JSON.parse(text) : undefined;
}

/** /mcp behind a key check that stands in for the API's. */
async function serve(opts: Partial<McpHttpOptions> = {}): Promise<string> {
  const sessions = new McpHttpSessions({ apiUrl: () => fake.api.url, sandboxUrl: fake.sandboxUrl, log: memoryLog(), ...opts });
  const server = createServer(async (req, res) => {
    const key = req.headers['x-api-key'];
    const team = typeof key === 'string' ? TEAMS[key] : undefined;
    if (!team) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 401, message: 'missing API key' }));
      return;
    }
    await sessions.handle(req, res, req.method === 'POST' ? await readJson(req) : undefined, { owner: team, apiKey: key as string });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push({ server, sessions });
  return `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`;
}

async function connect(url: string, key: string) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { 'x-api-key': key } } });
  const client = new Client({ name: 'svc-http-test', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as ToolResult;
  return { client, transport, call };
}

const post = (url: string, key: string, body: unknown, session?: string) => fetch(url, {
  method: 'POST', headers: { ...MCP_HEADERS, 'x-api-key': key, ...(session ? { 'mcp-session-id': session } : {}) }, body: JSON.stringify(body),
});

test('a session over HTTP: the tools, called with the key of each request', async () => {
  const url = await serve();
  const { client, transport, call } = await connect(url, 'key-a');
  assert.ok(transport.sessionId);
  assert.equal((await client.listTools()).tools.length, 11);
  const created = await call('create_sandbox', {});
  assert.ok(!created.isError, textOf(created));
  assert.equal(fake.api.requests.at(-1)!.headers['x-api-key'], 'key-a');

  // another key of the same team on the same session: its calls go with that key
  const listed = await post(url, 'key-a2', { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'list_sandboxes', arguments: {} } }, transport.sessionId);
  assert.equal(listed.status, 200);
  assert.match(await listed.text(), /"id":7/);
  assert.equal(fake.api.requests.at(-1)!.headers['x-api-key'], 'key-a2');
});

test('another team\'s key on a session, an unknown session, no session: refused as the MCP spec says', async () => {
  const url = await serve();
  const { transport } = await connect(url, 'key-a');
  const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
  const theirs = await post(url, 'key-b', list, transport.sessionId);
  assert.equal(theirs.status, 404);
  const body = await theirs.json() as { jsonrpc: string; error: { code: number; message: string } };
  assert.equal(body.jsonrpc, '2.0');
  assert.equal(body.error.code, -32001);
  assert.match(body.error.message, /Session not found/);
  assert.equal((await post(url, 'key-a', list, 'no-such-session')).status, 404);
  const none = await post(url, 'key-a', list);
  assert.equal(none.status, 400);
  assert.match(((await none.json()) as { error: { message: string } }).error.message, /initialize/);
  assert.equal((await post(url, 'key-a2', list, transport.sessionId)).status, 200, 'the same team, another key: the session is the team\'s');
  assert.equal((await fetch(url, { method: 'POST', headers: MCP_HEADERS, body: JSON.stringify(INIT) })).status, 401, 'the stand-in\'s own check');
});

test('DELETE ends the session and kills its code sandbox', async () => {
  const url = await serve();
  const { transport, call } = await connect(url, 'key-a');
  const ran = await call('run_code', { code: '1' });
  const id = /code sandbox (\S+)/.exec(textOf(ran))![1];
  assert.ok(fake.api.sandboxes.has(id));
  const sessionId = transport.sessionId!;
  await transport.terminateSession();
  assert.equal(fake.api.sandboxes.has(id), false, 'killed before DELETE answered');
  assert.equal((await post(url, 'key-a', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, sessionId)).status, 404);
});

test('an idle session is closed, and its code sandbox killed', async () => {
  const url = await serve({ idleMs: 300 });
  const { transport, call } = await connect(url, 'key-a');
  const id = /code sandbox (\S+)/.exec(textOf(await call('run_code', { code: '1' })))![1];
  const deadline = Date.now() + 5_000;
  while (fake.api.sandboxes.has(id) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(fake.api.sandboxes.has(id), false);
  assert.equal((await post(url, 'key-a', { jsonrpc: '2.0', id: 4, method: 'tools/list' }, transport.sessionId)).status, 404);
});

test('a team holds a bounded number of sessions; over it, a 429 JSON-RPC error', async () => {
  const url = await serve({ maxSessionsPerOwner: 2 });
  await connect(url, 'key-a');
  await connect(url, 'key-a2');
  const third = await post(url, 'key-a', INIT);
  assert.equal(third.status, 429);
  const body = await third.json() as { error: { code: number; message: string } };
  assert.match(body.error.message, /too many MCP sessions: 2 are open for your team.*DELETE \/mcp/);
  await connect(url, 'key-b');
});

test('a batch of more than one tools/call is refused with a JSON-RPC error; one call with notifications passes', async () => {
  const url = await serve();
  const { transport } = await connect(url, 'key-a');
  const callMsg = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'list_sandboxes', arguments: {} } });
  const many = await post(url, 'key-a', Array.from({ length: 100 }, (_, i) => callMsg(100 + i)), transport.sessionId);
  assert.equal(many.status, 400);
  const body = await many.json() as { error: { code: number; message: string } };
  assert.equal(body.error.code, -32600);
  assert.match(body.error.message, /a batch carries 100 tools\/call requests, and 1 is the most/);
  const one = await post(url, 'key-a', [{ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 0 } }, callMsg(9)], transport.sessionId);
  assert.equal(one.status, 200);
  assert.match(await one.text(), /"id":9/);
});

/** A POST with the Host and Origin headers given (fetch sets its own Host). */
function postAs(url: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { ...MCP_HEADERS, 'x-api-key': 'key-a', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d) => { text += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(INIT));
  });
}

test('without API keys, only requests to the listen host or a loopback name are served, from no other host\'s page', async () => {
  const url = await serve({ unauthenticated: { listenHost: '127.0.0.1' } });
  const port = new URL(url).port;
  const rebound = await postAs(url, { host: `evil.example:${port}` });
  assert.equal(rebound.status, 403);
  assert.match(rebound.text, /Invalid Host header \\"evil.example:\d+\\": without API keys, \/mcp answers only requests to this machine's loopback names \(localhost, 127\.0\.0\.1, \[::1\]\) and 127\.0\.0\.1/);
  assert.equal((await postAs(url, { host: `127.0.0.1:${port}`, origin: 'https://evil.example' })).status, 403);
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `127.0.0.2:${port}`]) {
    assert.equal((await postAs(url, { host })).status, 200, host);
  }
  for (const host of [`localhost.evil.example:${port}`, `127.0.0.1.nip.io:${port}`, `[::2]:${port}`]) {
    assert.equal((await postAs(url, { host })).status, 403, host);
  }
  assert.equal((await postAs(url, { host: `localhost:${port}`, origin: `http://localhost:${port}` })).status, 200);
  // with keys checked, the Host is not the API's concern
  assert.equal((await postAs(await serve(), { host: `evil.example:${port}` })).status, 200);
});
