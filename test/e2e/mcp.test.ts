/**
 * MCP against the whole platform (docs/mcp.md), through the official MCP SDK's client:
 * - svc's MCP server at /mcp on the API port (streamable HTTP) and `svc mcp` (stdio), every tool,
 *   run_code's session sandbox carrying state and dying with the session, errors as tool
 *   results, 401 without a key, another team's sandbox and session out of reach;
 * - E2B's MCP gateway for the official e2b SDK unchanged: `Sandbox.create({ mcp })` on the
 *   `mcp-gateway` template, then an MCP client through the data-plane proxy on port 50005 with the
 *   gateway's token reading a file, the reference servers offline, 401 without the token, and a bad
 *   config reported as the SDK reports it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { Sandbox as E2bSandbox } from 'e2b';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { NotFoundError, Sandbox, Team } from '@svc/sdk';
import { startPlatform, useE2bEnv, diagnoseFailures, waitFor, SVC_BIN, type RunningPlatform } from './harness.ts';
import { callTool, connectHttp, sandboxIdOf, textOf, type ToolResult } from './mcp-client.ts';

const RUN = Date.now().toString(36);
const TOOLS = [
  'create_sandbox', 'list_sandboxes', 'kill_sandbox', 'run_command', 'run_code', 'write_file', 'read_file', 'list_files',
  'get_url', 'pause_sandbox', 'resume_sandbox',
];
let p: RunningPlatform;
const clients: Client[] = [];

diagnoseFailures(() => p);
before(async () => {
  // The code interpreter's data directory: code-interpreter-v1 is built there already when its
  // test ran first, as in .ci/run; run_code without a sandbox needs it.
  p = await startPlatform({
    dataDir: '/tmp/svc-e2e-code-interpreter',
    env: { SVC_CODE_INTERPRETER_TEMPLATE: 'true', SVC_MCP_GATEWAY_TEMPLATE: 'true', SVC_CREATE_TIMEOUT_INSEC: '1200' },
  });
  useE2bEnv(p);
});
after(async () => {
  for (const c of clients) await c.close().catch((err: Error) => console.error(`closing an MCP client: ${err.message}`));
  const conn = { apiUrl: p.apiUrl, apiKey: p.apiKey };
  const left = await Sandbox.list({ ...conn, query: { metadata: { run: RUN } } }).nextItems().catch((err: Error) => {
    console.error(`listing this run's sandboxes failed: ${err.message}`); // nothing more to clean then
    return [];
  });
  for (const s of left) await Sandbox.kill(s.sandboxId, conn);
  await p?.stop();
});

const http = async (key?: string) => {
  const c = await connectHttp(`${p.apiUrl}/mcp`, key ? { 'X-API-Key': key } : {});
  clients.push(c.client);
  return c;
};

test('svc\'s MCP server over HTTP: no key is the API\'s 401; the tools are listed with their schemas', async () => {
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };
  const res = await fetch(`${p.apiUrl}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(init) });
  assert.equal(res.status, 401, 'no key: 401');
  assert.match(((await res.json()) as { message: string }).message, /API key/);
  const bad = await fetch(`${p.apiUrl}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer nope' }, body: JSON.stringify(init) });
  assert.equal(bad.status, 401, 'a wrong key: 401');

  const { client } = await http(p.apiKey);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort(), 'every tool of the issue, and no other');
  for (const t of tools) {
    assert.ok(t.description && t.description.length > 20, `${t.name} has a description`);
    assert.equal(t.inputSchema.type, 'object', `${t.name} has a JSON schema`);
  }
  const run = tools.find((t) => t.name === 'run_command')!;
  assert.deepEqual([...(run.inputSchema.required ?? [])].sort(), ['command', 'sandboxId']);
});

test('every sandbox tool over HTTP: create, commands, files, a port\'s URL, pause and resume, list, kill; failures are tool results', async () => {
  const { client } = await http(p.apiKey);
  const created = await callTool(client, 'create_sandbox', { template: 'base', timeoutSeconds: 300, metadata: { run: RUN }, envs: { GREETING: 'hello-mcp' } });
  assert.ok(!created.isError, textOf(created));
  const id = sandboxIdOf(created);

  const echo = await callTool(client, 'run_command', { sandboxId: id, command: 'echo "$GREETING from $(pwd)"; echo oops >&2' });
  assert.ok(!echo.isError, textOf(echo));
  assert.match(textOf(echo), /hello-mcp from \/home\/user/, 'stdout, with the sandbox\'s envs');
  assert.match(textOf(echo), /oops/, 'stderr');
  const inTmp = await callTool(client, 'run_command', { sandboxId: id, command: 'pwd; echo "$X"', cwd: '/tmp', envs: { X: 'per-call' } });
  assert.match(textOf(inTmp), /\/tmp\s+per-call/, 'cwd and envs of the call');
  const failed = await callTool(client, 'run_command', { sandboxId: id, command: 'exit 3' });
  assert.ok(!failed.isError, 'a non-zero exit is a result, not a failure of the tool');
  assert.match(textOf(failed), /exit code:? 3/i);
  const slow = await callTool(client, 'run_command', { sandboxId: id, command: 'sleep 30', timeoutSeconds: 1 });
  assert.equal(slow.isError, true, 'a command past its timeout is a tool error');
  assert.match(textOf(slow), /time(d)? ?out/i);

  const flood = await callTool(client, 'run_command', { sandboxId: id, command: 'yes svc | head -c 40000000; echo done' });
  assert.equal(flood.isError, true, 'a command that floods its output is killed, not kept in the API\'s memory');
  assert.match(textOf(flood), /more than 16 MB.*redirect/s);

  const wrote = await callTool(client, 'write_file', { sandboxId: id, path: '/home/user/notes/a.txt', content: 'line one\nline two\n' });
  assert.ok(!wrote.isError, textOf(wrote));
  assert.equal(textOf(await callTool(client, 'read_file', { sandboxId: id, path: '/home/user/notes/a.txt' })).includes('line one\nline two'), true);
  assert.match(textOf(await callTool(client, 'list_files', { sandboxId: id, path: '/home/user/notes' })), /a\.txt/);
  const missing = await callTool(client, 'read_file', { sandboxId: id, path: '/home/user/none.txt' });
  assert.equal(missing.isError, true, 'a missing file is a tool error');
  assert.match(textOf(missing), /none\.txt/);

  const bg = await callTool(client, 'run_command', { sandboxId: id, command: 'python3 -m http.server 8000 --directory /home/user/notes', background: true });
  assert.ok(!bg.isError, textOf(bg));
  const url = await callTool(client, 'get_url', { sandboxId: id, port: 8000 });
  const link = new URL(textOf(url).match(/https?:\/\/\S+/)![0]);
  assert.equal(link.hostname.split('.')[0], `8000-${id}`, `the URL names the port and the sandbox: ${link}`);
  const page = await waitFor('the sandbox\'s server through get_url\'s address', async () => {
    const r = await viaProxy(link.host, '/a.txt');
    return r.status === 200 ? r : undefined;
  });
  assert.match(page.body, /line two/);

  const listed = await callTool(client, 'list_sandboxes', {});
  assert.ok(textOf(listed).includes(id), 'list_sandboxes holds it');
  assert.ok(!(await callTool(client, 'pause_sandbox', { sandboxId: id })).isError);
  const whilePaused = await callTool(client, 'run_command', { sandboxId: id, command: 'true' });
  assert.equal(whilePaused.isError, true, 'a command on a paused sandbox is a tool error');
  assert.match(textOf(whilePaused), /paused.*resume_sandbox/is, 'that says what to do');
  assert.ok(!(await callTool(client, 'resume_sandbox', { sandboxId: id })).isError);
  assert.match(textOf(await callTool(client, 'run_command', { sandboxId: id, command: 'cat /home/user/notes/a.txt' })), /line one/, 'files kept across the pause');

  assert.ok(!(await callTool(client, 'kill_sandbox', { sandboxId: id })).isError);
  const gone = await callTool(client, 'run_command', { sandboxId: id, command: 'true' });
  assert.equal(gone.isError, true, 'a killed sandbox is a tool error');
  assert.match(textOf(gone), /list_sandboxes|not found|no sandbox/i);

  // The session survives every failure above, and a wrong argument type is refused by the schema.
  const typed = await client.callTool({ name: 'run_command', arguments: { sandboxId: id, command: 42 } }).then(
    (r) => ({ refused: r.isError === true, text: textOf(r as ToolResult) }),
    (err: Error) => ({ refused: true, text: err.message }),
  );
  assert.ok(typed.refused, 'a number for command is refused');
  assert.match(typed.text, /command/, `the refusal names the argument: ${typed.text}`);
  assert.ok(!(await callTool(client, 'list_sandboxes', {})).isError, 'the session still works');
});

test('run_code keeps one sandbox per session: state carries between calls, errors carry their traceback, charts are images; it dies with the session', async () => {
  const { client, transport } = await http(p.apiKey);
  const first = await callTool(client, 'run_code', { code: 'x = 21\nprint("set")' }, 1_300_000);
  assert.ok(!first.isError, textOf(first));
  const again = await callTool(client, 'run_code', { code: 'x * 2' });
  assert.match(textOf(again), /\b42\b/, 'x carried over to the next call');
  const err = await callTool(client, 'run_code', { code: 'def f():\n    return 1 / 0\nf()' });
  assert.equal(err.isError, true, 'an exception is a tool error');
  assert.match(textOf(err), /ZeroDivisionError/);
  assert.match(textOf(err), /Traceback|line \d|in f/, 'with its traceback');
  const chart = await callTool(client, 'run_code', { code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()' });
  const image = chart.content.find((c) => c.type === 'image');
  assert.ok(image && image.mimeType === 'image/png' && Buffer.from(image.data!, 'base64').subarray(1, 4).toString() === 'PNG', 'the chart is a PNG image');
  const flood = await callTool(client, 'run_code', { code: 'for _ in range(20):\n    print("x" * 1_000_000)' });
  assert.equal(flood.isError, true, `code that floods its output is cut off: ${textOf(flood).slice(0, 400)}`);
  assert.match(textOf(flood), /more than 2 MB/);
  assert.match(textOf(await callTool(client, 'run_code', { code: 'x + 1' })), /\b22\b/, 'and the session\'s state is still there');
  const js = await callTool(client, 'run_code', { code: 'const a = [1, 2, 3]; a.map((v) => v * 10).join(",")', language: 'javascript' });
  assert.match(textOf(js), /10,20,30/, 'another language in the same sandbox');

  const own = (await Sandbox.list({ apiUrl: p.apiUrl, apiKey: p.apiKey }).nextItems())
    .filter((s) => s.templateId !== 'base' && textOf(first).includes(s.sandboxId));
  assert.equal(own.length, 1, `the session's code sandbox is named in the result and running (${textOf(first)})`);
  await transport.terminateSession();
  await waitFor('the session\'s sandbox to be killed', async () => {
    const still = await Sandbox.getInfo(own[0]!.sandboxId, { apiUrl: p.apiUrl, apiKey: p.apiKey }).then(() => true, (err: Error) => {
      if (err instanceof NotFoundError) return false;
      throw err;
    });
    return still ? undefined : true;
  }, 30_000);
});

test('team scoping: another team\'s sandbox is unknown to its tools, and another team cannot use a session it did not open', async () => {
  const admin = { apiUrl: p.apiUrl, apiKey: p.apiKey, sandboxUrl: p.sandboxUrl };
  const other = await Team.create(`mcp-${RUN}`, admin);
  const mine = await Sandbox.create('base', { ...admin, metadata: { run: RUN }, timeoutMs: 120_000 });
  const { client } = await http(other.apiKey);
  const tries = [
    await callTool(client, 'run_command', { sandboxId: mine.sandboxId, command: 'id' }),
    await callTool(client, 'read_file', { sandboxId: mine.sandboxId, path: '/etc/hostname' }),
    await callTool(client, 'kill_sandbox', { sandboxId: mine.sandboxId }),
  ];
  for (const r of tries) assert.equal(r.isError, true, `another team's sandbox is out of reach: ${textOf(r)}`);
  assert.ok(!textOf(await callTool(client, 'list_sandboxes', {})).includes(mine.sandboxId), 'nor listed');
  assert.equal(await mine.isRunning(), true, 'and still running');

  // A session is its opener's: its id with another team's key is an unknown session.
  const { transport } = await http(p.apiKey);
  const hijack = await fetch(`${p.apiUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-api-key': other.apiKey, 'mcp-session-id': transport.sessionId! },
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
  });
  assert.equal(hijack.status, 404, 'another team\'s key on a session: 404');
  await mine.kill();
});

test('svc mcp over stdio drives sandboxes with the same tools', async () => {
  const transport = new StdioClientTransport({
    command: process.execPath, args: [SVC_BIN, 'mcp'],
    env: { ...(process.env as Record<string, string>), SVC_API_URL: p.apiUrl, SVC_API_KEY: p.apiKey, SVC_SANDBOX_URL: p.sandboxUrl },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'svc-e2e-stdio', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  assert.equal((await client.listTools()).tools.length, TOOLS.length);
  const created = await callTool(client, 'create_sandbox', { template: 'base', metadata: { run: RUN } });
  const id = sandboxIdOf(created);
  assert.match(textOf(await callTool(client, 'run_command', { sandboxId: id, command: 'echo over-stdio' })), /over-stdio/);
  assert.ok(!(await callTool(client, 'kill_sandbox', { sandboxId: id })).isError);
  await client.close();
});

test('E2B\'s MCP gateway: Sandbox.create({ mcp }) with the reference servers offline, a client through the proxy on port 50005 with the token; 401 without it', async () => {
  const sbx = await E2bSandbox.create({
    mcp: { filesystem: { paths: ['/home/user'] }, memory: {}, time: {}, sequentialthinking: {}, git: { paths: ['/home/user'] }, fetch: {} },
    metadata: { run: RUN }, timeoutMs: 300_000,
  });
  try {
    const token = await sbx.getMcpToken();
    assert.ok(token && token.length >= 16, 'the token is in /etc/mcp-gateway/.token');
    assert.match(sbx.getMcpUrl(), new RegExp(`^https://50005-${sbx.sandboxId}\\..+/mcp$`), 'E2B\'s URL form');
    await sbx.files.write('/home/user/hello.txt', 'hello from the gateway');
    const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '50005' };

    const noToken = await fetch(`${p.sandboxUrl}/mcp`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    assert.equal(noToken.status, 401, 'the gateway wants its token');
    const { client } = await connectHttp(`${p.sandboxUrl}/mcp`, { ...headers, Authorization: `Bearer ${token}` });
    clients.push(client);
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const t of ['read_text_file', 'list_directory', 'create_entities', 'get_current_time', 'sequentialthinking', 'git_status', 'fetch']) {
      assert.ok(names.includes(t), `${t} is served (${names.join(', ')})`);
    }
    assert.match(textOf(await callTool(client, 'read_text_file', { path: '/home/user/hello.txt' })), /hello from the gateway/);
    assert.match(textOf(await callTool(client, 'get_current_time', { timezone: 'UTC' })), /20\d\d-/);
    assert.ok(!(await callTool(client, 'create_entities', { entities: [{ name: 'svc', entityType: 'platform', observations: ['runs sandboxes'] }] })).isError);
  } finally {
    await sbx.kill();
  }
  await assert.rejects(
    E2bSandbox.create({ mcp: { noSuchServer: {} } as never, metadata: { run: RUN } }),
    (err: Error) => /Failed to start MCP gateway/.test(err.message) && /noSuchServer/.test(err.message),
    'an unknown server fails the create as the SDK reports it, naming the server',
  );
});

/** A request to the data-plane proxy naming the sandbox by Host, as a browser sends it. */
function viaProxy(host: string, path: string): Promise<{ status: number; body: string }> {
  const u = new URL(p.sandboxUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, headers: { Host: host } }, (r) => {
      let body = '';
      r.on('data', (c: Buffer) => { body += c.toString(); });
      r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
