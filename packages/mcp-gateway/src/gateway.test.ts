/**
 * The gateway as the SDK uses it: bundled, started with `mcp-gateway --config` (which returns once
 * it serves), driven by an MCP client over streamable HTTP with the bearer token. The servers:
 * the reference ones, a GitHub-style stdio server (checked out already, so nothing is cloned)
 * that clashes with `time` on a tool name and can crash, and a remote server on loopback.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { buildGateway, connect, freePort, runGateway, text, type Gateway } from './test-support.ts';

/** A stdio MCP server by hand (no dependencies): a clashing get_current_time, and crash, which exits mid-call. */
const CRASHY = `import { createInterface } from 'node:readline';
const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'crashy', version: '1' } } });
  if (m.method === 'tools/list') return send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'get_current_time', inputSchema: { type: 'object' } }, { name: 'crash', inputSchema: { type: 'object' } }] } });
  if (m.method === 'tools/call' && m.params.name === 'crash') { console.error('crashy: crashing on purpose'); process.exit(3); }
  if (m.method === 'tools/call') return send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'crashy clock, ' + process.env.CRASHY_GREETING }] } });
  send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
}).on('close', () => process.exit(0));
`;

let g: Gateway;
let work: string;
let client: Client | undefined;
let remote: Server;
let web: Server;
let remotePort: number;
let webPort: number;

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

before(async () => {
  work = await mkdtemp(join(tmpdir(), 'mcp-gateway-test-'));
  g = { bundle: await buildGateway(), stateDir: join(work, 'state'), port: await freePort(), token: 'test-token-1234' };
  await mkdir(join(work, 'files/sub'), { recursive: true });
  await writeFile(join(work, 'files/hello.txt'), 'hello from the gateway\n');
  await mkdir(join(work, 'repo'));
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: join(work, 'repo') });
  git('init', '-q', '-b', 'main');
  await writeFile(join(work, 'repo/a.txt'), 'a\n');
  git('add', 'a.txt');
  git('commit', '-q', '-m', 'first');
  await writeFile(join(work, 'repo/untracked.txt'), 'new\n');
  const crashy = join(g.stateDir, 'github/test/crashy');
  await mkdir(crashy, { recursive: true });
  await writeFile(join(crashy, 'server.mjs'), CRASHY);
  // A remote MCP server (stateless streamable HTTP) that wants a header, and a web page for fetch.
  remote = createServer((req, res) => {
    if (req.headers['x-remote-key'] !== 'k') {
      res.writeHead(401).end();
      return;
    }
    const server = new McpServer({ name: 'clock', version: '1.0.0' });
    server.registerTool('get_current_time', { description: 'a remote clock' }, () => ({ content: [{ type: 'text', text: 'remote clock' }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => void server.close());
    server.connect(transport).then(() => transport.handleRequest(req, res)).catch((err: Error) => res.destroy(err));
  });
  remotePort = await listen(remote);
  web = createServer((req, res) => {
    if (req.url === '/page') {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html><head><title>t</title><script>x()</script></head><body><nav>menu</nav><h1>Fetched page</h1><p>Some <b>bold</b> text and a <a href="/x">link</a>.</p></body></html>');
    } else res.writeHead(404).end();
  });
  webPort = await listen(web);
});

after(async () => {
  await client?.close();
  if (g) await runGateway(g, ['stop']);
  remote?.closeAllConnections();
  web?.closeAllConnections();
  await Promise.all([remote, web].map((s) => new Promise((r) => (s ? s.close(r) : r(undefined)))));
  await rm(work, { recursive: true, force: true });
  await rm(g.bundle, { recursive: true, force: true });
});

test('--config returns once the gateway serves; the token is written 0600 for root only', async () => {
  const config = {
    filesystem: { paths: [join(work, 'files')] },
    memory: {},
    time: {},
    git: { paths: [work] },
    fetch: {},
    sequentialthinking: {},
    'github/test/crashy': { runCmd: `${process.execPath} server.mjs`, envs: { CRASHY_GREETING: 'hi' } },
    clock: { url: `http://127.0.0.1:${remotePort}/mcp`, headers: { 'X-Remote-Key': 'k' } },
  };
  const r = await runGateway(g, ['--config', JSON.stringify(config)]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /serving \d+ tools of filesystem, memory, time, git, fetch, sequentialthinking, github\/test\/crashy, clock at http:\/\/127\.0\.0\.1:\d+\/mcp/);
  // Served already: no retry, no wait.
  client = await connect(g);
  const token = join(g.stateDir, '.token');
  assert.equal(await readFile(token, 'utf8'), g.token);
  assert.equal((await stat(token)).mode & 0o777, 0o600);
  assert.equal((await stat(g.stateDir)).mode & 0o777, 0o700);
});

test('tools of every server in one list; a clashing name is prefixed with the later server\'s', async () => {
  const names = (await client!.listTools()).tools.map((t) => t.name);
  for (const name of ['read_text_file', 'list_directory', 'create_entities', 'read_graph', 'get_current_time', 'convert_time', 'git_status', 'git_log', 'fetch', 'sequentialthinking', 'crash']) {
    assert.ok(names.includes(name), `${name} in ${names.join(' ')}`);
  }
  assert.ok(names.includes('github_test_crashy__get_current_time'));
  assert.ok(names.includes('clock__get_current_time'));
  assert.equal(names.filter((n) => n === 'get_current_time').length, 1);
  assert.equal(new Set(names).size, names.length);
  assert.deepEqual((await client!.listPrompts()).prompts.map((p) => p.name), ['fetch']);
  assert.ok((await client!.listResources()).resources.some((r) => r.uri === 'memory://knowledge-graph'));
});

test('calls reach the server that owns the tool', async () => {
  const call = async (name: string, args: Record<string, unknown>) => {
    const result = await client!.callTool({ name, arguments: args });
    assert.ok(!result.isError, `${name}: ${text(result)}`);
    return text(result);
  };
  assert.equal(await call('read_text_file', { path: join(work, 'files/hello.txt') }), 'hello from the gateway\n');
  assert.match(await call('list_directory', { path: join(work, 'files') }), /\[FILE\] hello\.txt\n\[DIR\] sub/);
  assert.match(await call('create_entities', { entities: [{ name: 'svc', entityType: 'project', observations: ['runs sandboxes'] }] }), /"name": "svc"/);
  assert.match(await readFile(join(g.stateDir, 'memory.jsonl'), 'utf8'), /"name":"svc"/);
  const now = JSON.parse(await call('get_current_time', { timezone: 'UTC' })) as { timezone: string; datetime: string };
  assert.equal(now.timezone, 'UTC');
  assert.match(now.datetime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
  const status = await call('git_status', { repo_path: join(work, 'repo') });
  assert.match(status, /^Repository status:\nOn branch main\n[\s\S]*untracked\.txt/);
  assert.match(await call('git_log', { repo_path: join(work, 'repo') }), /^Commit history:\nCommit: [0-9a-f]{40}\nAuthor: t\nDate: .*\nMessage: first\n/);
  const outside = await client!.callTool({ name: 'git_status', arguments: { repo_path: '/' } });
  assert.ok(outside.isError);
  assert.match(text(outside), /outside the allowed repository/);
  const page = await call('fetch', { url: `http://127.0.0.1:${webPort}/page` });
  assert.equal(page, `Contents of http://127.0.0.1:${webPort}/page:\n# Fetched page\n\nSome **bold** text and a [link](/x).`);
  assert.match(await call('fetch', { url: `http://127.0.0.1:${webPort}/page`, max_length: 10 }), /<error>Content truncated\. Call the fetch tool with a start_index of 10 to get more content\.<\/error>$/);
  assert.equal(await call('github_test_crashy__get_current_time', {}), 'crashy clock, hi');
  assert.equal(await call('clock__get_current_time', {}), 'remote clock');
});

test('a server that dies is reported in tool results, and the gateway keeps serving the others', async () => {
  const crashed = await client!.callTool({ name: 'crash', arguments: {} });
  assert.equal(crashed.isError, true);
  assert.match(text(crashed), /^MCP server 'github\/test\/crashy'/);
  const again = await client!.callTool({ name: 'crash', arguments: {} });
  assert.equal(again.isError, true);
  assert.match(text(again), /^MCP server 'github\/test\/crashy' is not running: it exited; its last output:\n[\s\S]*crashy: crashing on purpose/);
  const unknown = await client!.callTool({ name: 'no_such_tool', arguments: {} });
  assert.equal(unknown.isError, true);
  assert.ok(!(await client!.callTool({ name: 'get_current_time', arguments: { timezone: 'Asia/Tokyo' } })).isError);
});

test('/mcp wants the bearer token (401 without it or with another); other paths are 404', async () => {
  const url = `http://127.0.0.1:${g.port}`;
  const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  for (const auth of [undefined, 'Bearer wrong-token', `Basic ${g.token}`, `Bearer ${g.token}x`]) {
    const res = await fetch(`${url}/mcp`, { method: 'POST', headers: { ...headers, ...(auth ? { authorization: auth } : {}) }, body: init });
    assert.equal(res.status, 401, String(auth));
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /Unauthorized/);
  }
  const other = await fetch(`${url}/other`, { headers: { authorization: `Bearer ${g.token}` } });
  assert.equal(other.status, 404);
  await other.body?.cancel();
  await assert.rejects(connect(g, 'wrong-token'), /401|Unauthorized/);
});
