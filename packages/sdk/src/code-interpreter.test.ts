/**
 * `runCode` and the code contexts: against the code interpreter double (streaming, clocks, error
 * mapping, headers), and against the real service (packages/code-interpreter) with real kernels,
 * reached at a plain loopback URL as the data plane would forward to it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createCodeInterpreter, type CodeInterpreter } from '@svc/code-interpreter';
import {
  InvalidArgumentError, NotFoundError, Sandbox, SandboxError, TimeoutError, type OutputMessage, type Result,
} from './index.ts';
import { echoExecution, startFakeCodeInterpreter, type FakeCodeInterpreter } from './testing/fake-code-interpreter.ts';

const stamp = '2026-01-02T03:04:05.678Z';

function sandboxAt(sandboxUrl: string): Sandbox {
  return new Sandbox({
    sandboxId: 'sbx-ci', envdVersion: '0.6.4', sandboxUrl, envdAccessToken: 'envd-tok', trafficAccessToken: 'traffic-tok', apiUrl: 'http://127.0.0.1:1',
  });
}

describe('runCode against the code interpreter double', () => {
  let fake: FakeCodeInterpreter;
  let sbx: Sandbox;

  before(async () => {
    fake = await startFakeCodeInterpreter();
    sbx = sandboxAt(fake.url);
  });
  after(() => fake.close());

  test('sends the request to port 49999 through the data plane with the tokens', async () => {
    fake.onExecute = echoExecution;
    const execution = await sbx.runCode('print(1)', { language: 'python', envs: { A: '1' } });
    const req = fake.requests.at(-1)!;
    assert.equal(req.method, 'POST');
    assert.equal(req.path, '/execute');
    assert.deepEqual(req.body, { code: 'print(1)', language: 'python', env_vars: { A: '1' } });
    assert.equal(req.headers['e2b-sandbox-id'], 'sbx-ci');
    assert.equal(req.headers['e2b-sandbox-port'], '49999');
    assert.equal(req.headers['x-access-token'], 'envd-tok');
    assert.equal(req.headers['svc-traffic-access-token'], 'traffic-tok');
    assert.equal(req.headers['content-type'], 'application/json');
    assert.deepEqual(execution.logs, { stdout: ['print(1)'], stderr: [] });
    assert.equal(execution.text, 'ok');
    assert.equal(execution.executionCount, 1);
  });

  test('callbacks fire as lines arrive, before the execution ends', async () => {
    let stdoutSeen!: () => void;
    const seen = new Promise<void>((r) => { stdoutSeen = r; });
    fake.onExecute = async (_req, answer) => {
      answer.line({ type: 'stdout', text: 'first\n', timestamp: stamp });
      await seen; // the answer goes on only once the client has handled the first line
      answer.line({ type: 'keepalive' });
      answer.line({ type: 'stderr', text: 'warn\n', timestamp: stamp });
      answer.line({ type: 'result', text: '<Figure>', png: 'iVBORw0KGgo=', chart: { type: 'line' }, is_main_result: false });
      answer.line({ type: 'result', text: '42', is_main_result: true });
      answer.line({ type: 'error', name: 'ValueError', value: 'bad', traceback: 'Traceback...\nValueError: bad' });
      answer.line({ type: 'some_future_line' } as never);
      answer.line({ type: 'number_of_executions', execution_count: 7 });
      answer.end();
    };
    const stdout: OutputMessage[] = [];
    const stderr: OutputMessage[] = [];
    const results: Result[] = [];
    const errors: unknown[] = [];
    const execution = await sbx.runCode('x', {
      onStdout: (m) => { stdout.push(m); stdoutSeen(); },
      onStderr: (m) => { stderr.push(m); },
      onResult: (r) => { results.push(r); },
      onError: (e) => { errors.push(e); },
    });
    assert.equal(stdout.length, 1);
    assert.equal(`${stdout[0]}`, 'first\n');
    assert.equal(stdout[0].error, false);
    assert.equal(stdout[0].timestamp.toISOString(), stamp);
    assert.equal(stderr[0].error, true);
    assert.deepEqual(results[0], { text: '<Figure>', png: 'iVBORw0KGgo=', chart: { type: 'line' }, isMainResult: false });
    assert.deepEqual(errors, [{ name: 'ValueError', value: 'bad', traceback: 'Traceback...\nValueError: bad' }]);
    assert.deepEqual(execution.logs, { stdout: ['first\n'], stderr: ['warn\n'] });
    assert.equal(execution.results.length, 2);
    assert.equal(execution.text, '42');
    assert.equal(execution.error?.name, 'ValueError');
    assert.equal(execution.executionCount, 7);
    const json = JSON.parse(JSON.stringify(execution));
    assert.equal(json.text, '42');
    assert.equal(json.executionCount, 7);
  });

  test('a line split across chunks, inside a multi-byte character, is read whole', async () => {
    fake.onExecute = async (_req, answer) => {
      const line = Buffer.from(`${JSON.stringify({ type: 'stdout', text: 'héllo ✓\n', timestamp: stamp })}\n`);
      const cut = line.indexOf(Buffer.from('✓')) + 1;
      answer.raw(line.subarray(0, 5));
      await new Promise((r) => setTimeout(r, 20));
      answer.raw(line.subarray(5, cut));
      await new Promise((r) => setTimeout(r, 20));
      answer.raw(Buffer.concat([line.subarray(cut), Buffer.from('\n')]));
      answer.end();
    };
    const execution = await sbx.runCode('x');
    assert.deepEqual(execution.logs.stdout, ['héllo ✓\n']);
  });

  test('language and context together are refused before any request', async () => {
    const before = fake.requests.length;
    await assert.rejects(sbx.runCode('1', { language: 'python', context: 'ctx-1' }), InvalidArgumentError);
    assert.equal(fake.requests.length, before);
  });

  test('a context is sent as its id', async () => {
    fake.onExecute = echoExecution;
    await sbx.runCode('1', { context: { id: 'ctx-9', language: 'python', cwd: '/' } });
    assert.equal((fake.requests.at(-1)!.body as { context_id: string }).context_id, 'ctx-9');
    await sbx.runCode('1', { context: 'ctx-8' });
    assert.equal((fake.requests.at(-1)!.body as { context_id: string }).context_id, 'ctx-8');
  });

  test('an error answer becomes the SDK error of its status, with the body message', async () => {
    fake.onExecute = (_req, answer) => answer.fail(404, 'Context ctx-1 not found');
    const notFound = await sbx.runCode('1', { context: 'ctx-1' }).catch((e: unknown) => e);
    assert.ok(notFound instanceof NotFoundError);
    assert.equal(notFound.message, 'Context ctx-1 not found');
    assert.equal(notFound.status, 404);

    fake.onExecute = (_req, answer) => answer.fail(400, 'language r is not supported');
    await assert.rejects(sbx.runCode('1', { language: 'r' }), (e: unknown) => e instanceof InvalidArgumentError && /language r/.test(e.message));

    fake.onExecute = (_req, answer) => answer.fail(500, 'kernel did not start');
    await assert.rejects(sbx.runCode('1'), (e: unknown) => e instanceof SandboxError && e.status === 500 && /kernel did not start/.test(e.message));
  });

  test('past timeoutMs the request is cut and the run rejects with a TimeoutError', async () => {
    let gone!: Promise<void>;
    fake.onExecute = (_req, answer) => {
      gone = answer.clientGone;
      answer.line({ type: 'stdout', text: 'started\n', timestamp: stamp });
    };
    const stdout: string[] = [];
    const t0 = Date.now();
    const err = await sbx.runCode('while True: pass', { timeoutMs: 300, onStdout: (m) => { stdout.push(m.line); } }).catch((e: unknown) => e);
    assert.ok(err instanceof TimeoutError, String(err));
    assert.equal(err.code, 'deadline_exceeded');
    assert.match(err.message, /timeoutMs/);
    assert.ok(Date.now() - t0 < 3000);
    assert.deepEqual(stdout, ['started\n'], 'output before the deadline was delivered');
    await gone; // the service sees the client go, which makes it interrupt the kernel
  });

  test('no answer within requestTimeoutMs is a TimeoutError; the caller\'s signal aborts', async () => {
    fake.onExecute = () => { /* never answers */ };
    const err = await sbx.runCode('1', { requestTimeoutMs: 200 }).catch((e: unknown) => e);
    assert.ok(err instanceof TimeoutError, String(err));
    assert.equal(err.code, 'timeout');
    assert.match(err.message, /requestTimeoutMs/);

    fake.onExecute = (_req, answer) => answer.start();
    const aborted = await sbx.runCode('1', { signal: AbortSignal.timeout(200) }).catch((e: unknown) => e);
    assert.ok(aborted instanceof SandboxError && !(aborted instanceof TimeoutError), String(aborted));
    assert.equal(aborted.code, 'aborted');
  });

  test('timeoutMs 0 has no deadline; the request deadline ends with the headers', async () => {
    fake.onExecute = async (_req, answer) => {
      answer.start();
      await new Promise((r) => setTimeout(r, 400));
      answer.end();
    };
    const execution = await sbx.runCode('1', { timeoutMs: 0, requestTimeoutMs: 200 });
    assert.deepEqual(execution.results, []);
  });

  test('an answer cut before end_of_execution rejects', async () => {
    fake.onExecute = (_req, answer) => {
      answer.line({ type: 'stdout', text: 'a\n', timestamp: stamp });
      setTimeout(() => answer.cut(), 50);
    };
    await assert.rejects(sbx.runCode('1'), (e: unknown) => e instanceof SandboxError && !(e instanceof TimeoutError));
  });

  test('a callback that throws ends the run with its error and cuts the request', async () => {
    let gone!: Promise<void>;
    fake.onExecute = (_req, answer) => {
      gone = answer.clientGone;
      answer.line({ type: 'stdout', text: 'a\n', timestamp: stamp });
    };
    const mine = new Error('stop here');
    await assert.rejects(sbx.runCode('1', { timeoutMs: 0, onStdout: () => { throw mine; } }), (e: unknown) => e === mine);
    await gone;
  });

  test('contexts: create, list, restart, remove; an unknown one is NotFoundError', async () => {
    const ctx = await sbx.createCodeContext({ language: 'js', cwd: '/tmp' });
    assert.deepEqual(fake.requests.at(-1)!.body, { language: 'js', cwd: '/tmp' });
    assert.equal(fake.requests.at(-1)!.headers['e2b-sandbox-port'], '49999');
    assert.equal(ctx.language, 'javascript');
    assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
    await sbx.restartCodeContext(ctx);
    assert.equal(fake.requests.at(-1)!.path, `/contexts/${ctx.id}/restart`);
    await sbx.removeCodeContext(ctx.id);
    assert.equal(fake.requests.at(-1)!.method, 'DELETE');
    assert.deepEqual(await sbx.listCodeContexts(), []);
    await assert.rejects(sbx.removeCodeContext(ctx.id), (e: unknown) => e instanceof NotFoundError && /not found/.test(e.message));
    await assert.rejects(sbx.restartCodeContext('nope'), NotFoundError);
  });

  test('an unreachable code interpreter is a SandboxError naming it', async () => {
    const closed = await startFakeCodeInterpreter();
    await closed.close();
    const gone = sandboxAt(closed.url);
    await assert.rejects(gone.runCode('1'), (e: unknown) => e instanceof SandboxError && e.code === 'unreachable');
    await assert.rejects(gone.listCodeContexts(), (e: unknown) => e instanceof SandboxError && e.code === 'unreachable');
  });

  test('a redirect from the sandbox is an error, never followed (the SDK runs on the platform\'s hosts too: the /mcp tools)', async () => {
    const reached: string[] = [];
    const elsewhere = createServer((req, res) => { reached.push(req.url!); res.end('metadata'); });
    await new Promise<void>((r) => elsewhere.listen(0, '127.0.0.1', r));
    const target = `http://127.0.0.1:${(elsewhere.address() as { port: number }).port}/latest/meta-data`;
    const redirecting = createServer((_req, res) => { res.writeHead(307, { location: target }); res.end(); });
    await new Promise<void>((r) => redirecting.listen(0, '127.0.0.1', r));
    try {
      const sbxThere = sandboxAt(`http://127.0.0.1:${(redirecting.address() as { port: number }).port}`);
      await assert.rejects(sbxThere.runCode('1'), (e: unknown) => e instanceof SandboxError && !/metadata/.test((e as Error).message));
      await assert.rejects(sbxThere.listCodeContexts(), SandboxError);
      await assert.rejects(sbxThere.files.read('/etc/hostname'), (e: unknown) => e instanceof Error && !/metadata/.test((e as Error).message));
      assert.deepEqual(reached, [], 'nothing followed the redirect');
    } finally {
      elsewhere.close();
      redirecting.close();
    }
  });
});

describe('runCode against the real code interpreter', () => {
  let interpreter: CodeInterpreter;
  let workDir: string;
  let sbx: Sandbox;
  // envd's /envs as an unsecured sandbox's envd answers it (no variables): the service asks it before each run.
  const envd = createServer((_req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{}'); });

  before(async () => {
    workDir = realpathSync(mkdtempSync(join(tmpdir(), 'svc-sdk-ci-')));
    await new Promise<void>((r) => envd.listen(0, '127.0.0.1', r));
    interpreter = createCodeInterpreter({ log: () => {}, defaultCwd: workDir, envdEnvsUrl: `http://127.0.0.1:${(envd.address() as { port: number }).port}/envs` });
    await new Promise<void>((r) => interpreter.server.listen(0, '127.0.0.1', r));
    sbx = sandboxAt(`http://127.0.0.1:${(interpreter.server.address() as { port: number }).port}`);
  });
  after(async () => {
    await interpreter.close();
    envd.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  test('python: streamed output, the main result, an execution count, envs for one run', async () => {
    const chunks: string[] = [];
    const execution = await sbx.runCode('import os\nprint("hi", os.environ.get("SVC_CI_X"))\nx = 6\nx * 7', {
      envs: { SVC_CI_X: 'set' },
      onStdout: (m) => { chunks.push(m.line); },
    });
    assert.equal(execution.error, undefined);
    assert.deepEqual(chunks, ['hi set\n']);
    assert.equal(execution.text, '42');
    assert.ok(execution.executionCount! >= 1);
    assert.equal((await sbx.runCode('print(os.environ.get("SVC_CI_X"))')).logs.stdout.join(''), 'None\n', 'envs last one run');
  });

  test('python: an exception is execution.error with its traceback', async () => {
    const execution = await sbx.runCode('1 / 0');
    assert.equal(execution.error?.name, 'ZeroDivisionError');
    assert.match(execution.error!.value, /division by zero/);
    assert.match(execution.error!.traceback, /ZeroDivisionError/);
  });

  test('a run past timeoutMs rejects with a TimeoutError and the kernel is interrupted', async () => {
    await assert.rejects(sbx.runCode('import time\ntime.sleep(30)', { timeoutMs: 1000 }), TimeoutError);
    const t0 = Date.now();
    const next = await sbx.runCode('"free again"', { timeoutMs: 10_000 });
    assert.equal(next.text, 'free again');
    assert.ok(Date.now() - t0 < 5000, 'the next run did not wait for the sleep');
  });

  test('javascript by language; contexts of their own, removed ones are NotFoundError', async () => {
    assert.equal((await sbx.runCode('const a = 20; a + 1', { language: 'js' })).text, '21');
    const ctx = await sbx.createCodeContext({ language: 'bash', cwd: workDir });
    assert.equal(ctx.language, 'bash');
    assert.equal(ctx.cwd, workDir);
    const run = await sbx.runCode('echo "in $(pwd)"; Y=5', { context: ctx });
    assert.deepEqual(run.logs.stdout.join(''), `in ${workDir}\n`);
    assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
    await sbx.restartCodeContext(ctx);
    assert.equal((await sbx.runCode('echo "Y=$Y"', { context: ctx })).logs.stdout.join(''), 'Y=\n', 'a restart forgets the variables');
    await sbx.removeCodeContext(ctx);
    await assert.rejects(sbx.runCode('echo', { context: ctx }), NotFoundError);
    await assert.rejects(sbx.createCodeContext({ cwd: join(workDir, 'missing') }), InvalidArgumentError);
  });
});
