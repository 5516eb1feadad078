/**
 * What the service refuses, over HTTP as the official SDK calls it, in a secured sandbox (a
 * stand-in for envd that takes one token): who may do what on the contexts routes, how many
 * contexts there may be, how large a body and which cwd, and how long a request may take to arrive.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { CodeContext, ExecutionLine } from '@svc/contracts/code-interpreter';
import { MAX_CONTEXTS } from './contexts.ts';
import { createCodeInterpreter, type CodeInterpreter } from './server.ts';

const TOKEN = 'the-sandbox-token';
let envd: Server;
let envdUrl: string;
let interpreter: CodeInterpreter;
let base: string;
let workDir: string;

before(async () => {
  workDir = realpathSync(mkdtempSync(join(tmpdir(), 'svc-ci-limits-')));
  envd = createServer((req, res) => {
    res.writeHead(req.headers['x-access-token'] === TOKEN ? 200 : 401, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise<void>((r) => envd.listen(0, '127.0.0.1', r));
  envdUrl = `http://127.0.0.1:${(envd.address() as { port: number }).port}/envs`;
  interpreter = createCodeInterpreter({ log: () => {}, defaultCwd: workDir, envdEnvsUrl: envdUrl });
  await new Promise<void>((r) => interpreter.server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(interpreter.server.address() as { port: number }).port}`;
  await interpreter.warmUp();
});

after(async () => {
  await interpreter.close();
  await new Promise<void>((r) => envd.close(() => r()));
  rmSync(workDir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  body: unknown;
}

/** A call as the official SDK makes it: JSON, and the token only when one is given. */
async function call(method: string, path: string, opts: { token?: string; body?: unknown; url?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.token) headers['x-access-token'] = opts.token;
  const res = await fetch(`${opts.url ?? base}${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text.split('\n')[0]) as unknown : undefined };
}

const idOf = (a: Answer) => (a.body as CodeContext).id;

test('contexts routes: a wrong token is a 401 on each; without one a secured sandbox lists and makes contexts, and removes or restarts only those made without it', async () => {
  const listed = await call('GET', '/contexts', { token: TOKEN });
  const defaults = listed.body as CodeContext[];
  const python = defaults.find((c) => c.language === 'python')!.id;
  const javascript = defaults.find((c) => c.language === 'javascript')!.id;

  for (const [method, path] of [['GET', '/contexts'], ['POST', '/contexts'], ['DELETE', `/contexts/${python}`], ['POST', `/contexts/${python}/restart`]]) {
    const wrong = await call(method, path, { token: 'not-the-token', body: method === 'POST' && path === '/contexts' ? { language: 'bash' } : undefined });
    assert.equal(wrong.status, 401, `${method} ${path} with a wrong token`);
  }

  // The official SDKs send no token on these routes.
  const anonymousList = await call('GET', '/contexts');
  assert.equal(anonymousList.status, 200);
  assert.deepEqual((anonymousList.body as CodeContext[]).map((c) => c.id).sort(), [python, javascript].sort());
  const made = await call('POST', '/contexts', { body: { language: 'bash' } });
  assert.equal(made.status, 200);
  assert.equal((await call('POST', `/contexts/${idOf(made)}/restart`)).status, 204);
  assert.equal((await call('DELETE', `/contexts/${idOf(made)}`)).status, 204);

  const restartDefault = await call('POST', `/contexts/${python}/restart`);
  assert.equal(restartDefault.status, 401);
  assert.match((restartDefault.body as { message: string }).message, /is a default context: send the envd access token as X-Access-Token/);
  assert.equal((await call('DELETE', `/contexts/${python}`)).status, 401);

  const holders = await call('POST', '/contexts', { token: TOKEN, body: { language: 'bash' } });
  assert.equal((await call('DELETE', `/contexts/${idOf(holders)}`)).status, 401, 'a context made with the token needs it');
  assert.equal((await call('DELETE', `/contexts/${idOf(holders)}`, { token: TOKEN })).status, 204);
  assert.equal((await call('DELETE', `/contexts/${javascript}`, { token: TOKEN })).status, 204, 'the holder removes a default context');

  // Code runs only with the token, in any context.
  const open = idOf(await call('POST', '/contexts', { body: { language: 'bash' } }));
  assert.equal((await call('POST', '/execute', { body: { code: 'echo hi', context_id: open } })).status, 401);
  assert.equal((await call('DELETE', `/contexts/${open}`)).status, 204);
});

async function execute(body: unknown): Promise<ExecutionLine[]> {
  const res = await fetch(`${base}/execute`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-access-token': TOKEN }, body: JSON.stringify(body) });
  assert.equal(res.status, 200);
  return (await res.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as ExecutionLine);
}

test(`at most ${MAX_CONTEXTS} contexts at once: the next is a 429 with the usual body, until one is removed`, async () => {
  const ids: string[] = [];
  try {
    for (let i = 0; i < MAX_CONTEXTS; i++) {
      const made = await call('POST', '/contexts', { body: { language: 'bash' } });
      assert.equal(made.status, 200, JSON.stringify(made.body));
      ids.push(idOf(made));
    }
    const refused = await call('POST', '/contexts', { token: TOKEN, body: { language: 'bash' } });
    assert.equal(refused.status, 429);
    assert.deepEqual(Object.keys(refused.body as object).sort(), ['code', 'message']);
    assert.equal((refused.body as { code: number }).code, 429);
    assert.match((refused.body as { message: string }).message, new RegExp(`already ${MAX_CONTEXTS} contexts`));
    // The defaults are not counted: a run in a language without one yet still makes it.
    const ts = await execute({ code: '6 * 7', language: 'typescript' });
    assert.deepEqual(ts.filter((l) => l.type === 'result' || l.type === 'error').map((l) => (l as { text?: string }).text), ['42']);
    assert.equal((await call('DELETE', `/contexts/${ids.pop()}`)).status, 204);
    const again = await call('POST', '/contexts', { body: { language: 'bash' } });
    assert.equal(again.status, 200);
    ids.push(idOf(again));
  } finally {
    for (const id of ids) await call('DELETE', `/contexts/${id}`, { token: TOKEN });
  }
});

test('POST /contexts: a body past 8 KiB is a 413; a cwd that cannot be used is a plain 400 "cwd not found"', async () => {
  const large = await call('POST', '/contexts', { body: { language: 'bash', cwd: workDir, padding: 'x'.repeat(20_000) } });
  assert.equal(large.status, 413);
  const file = join(workDir, 'a-file');
  writeFileSync(file, '');
  for (const cwd of ['/no/such/directory', file, 'relative/path', '/root/../no/such']) {
    const bad = await call('POST', '/contexts', { body: { language: 'bash', cwd } });
    assert.deepEqual([bad.status, bad.body], [400, { code: 400, message: 'cwd not found' }], cwd);
  }
});

test('HTTP deadlines: a request that trickles in is cut; an execution that streams for longer is not', async () => {
  const quick = createCodeInterpreter({ log: () => {}, defaultCwd: workDir, envdEnvsUrl: envdUrl, keepaliveMs: 200, httpTimeouts: { requestMs: 1_000, headersMs: 1_000, checkEveryMs: 100 } });
  await new Promise<void>((r) => quick.server.listen(0, '127.0.0.1', r));
  const port = (quick.server.address() as { port: number }).port;
  try {
    const socket = connect({ host: '127.0.0.1', port });
    socket.write('POST /execute HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"code":');
    const started = Date.now();
    const cut = await new Promise<number | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), 5_000);
      socket.on('close', () => { clearTimeout(timer); resolve(Date.now() - started); });
      socket.on('error', () => { /* the close that follows is what counts */ });
      socket.resume();
    });
    socket.destroy();
    assert.ok(cut !== undefined, 'a request whose body never ends is still open after 5 s');

    const run = await fetch(`http://127.0.0.1:${port}/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-access-token': TOKEN },
      body: JSON.stringify({ code: 'sleep 2.5; echo done', language: 'bash' }),
    });
    const lines = (await run.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as ExecutionLine);
    assert.deepEqual(lines.filter((l) => l.type === 'stdout').map((l) => (l as { text: string }).text), ['done\n']);
    assert.deepEqual(lines.at(-1), { type: 'end_of_execution' });
  } finally {
    await quick.close();
  }
});

test('a stop while the default contexts start leaves no kernel behind', async () => {
  const before = new Set(children());
  const stopping = createCodeInterpreter({ log: () => {}, defaultCwd: workDir, envdEnvsUrl: envdUrl });
  const warming = stopping.warmUp().then(() => 'started', (err: Error) => err.message);
  await new Promise((r) => setTimeout(r, 100));
  await stopping.close();
  assert.match(await warming, /stopping/);
  assert.deepEqual(children().filter((pid) => !before.has(pid)), [], 'a kernel started for the stopped interpreter is still running');
});

/** This process's children: each kernel is one (those of the shared interpreter were there before). */
function children(): number[] {
  return readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}
