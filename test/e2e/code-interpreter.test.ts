/**
 * The code interpreter through the platform: the official @e2b/code-interpreter SDK against a
 * `svc up` that makes the code-interpreter-v1 template (docs/code-interpreter.md).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { Sandbox } from '@e2b/code-interpreter';
import { Sandbox as SvcSandbox } from '@svc/sdk';
import { SVC_BIN, startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';

let p: RunningPlatform;
let sbx: Sandbox;
diagnoseFailures(() => p);
before(async () => {
  // svc up is up once `base` is; code-interpreter-v1 builds after that in the background (about
  // 6 minutes on a fresh machine), and a create of it meanwhile waits for it within the create
  // timeout, which is long here for that reason (docs/quickstart.md).
  // The create goes over node:http, which has no deadline of its own (fetch gives up on headers
  // after 300 s), and the official SDK then connects to the sandbox it made.
  p = await startPlatform({ dataDir: '/tmp/svc-e2e-code-interpreter', env: { SVC_CODE_INTERPRETER_TEMPLATE: 'true', SVC_CREATE_TIMEOUT_INSEC: '1200' } });
  useE2bEnv(p);
  // The build first: the gateway's call to the master gives up after 300 s without an answer
  // (fetch's header limit), and the build took longer than that once on a slow mirror.
  await templateBuilt(p, 'code-interpreter-v1', 540_000);
  const made = await postJson(`${p.apiUrl}/sandboxes`, { templateID: 'code-interpreter-v1', timeout: 600 }, { 'X-API-Key': p.apiKey });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  sbx = await Sandbox.connect(String(made.body.sandboxID));
});
/** Waits until the template's build is ready (E2B's list, buildStatus); its failure ends the wait. */
async function templateBuilt(platform: RunningPlatform, alias: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    const res = await fetch(`${platform.apiUrl}/templates`, { headers: { 'X-API-Key': platform.apiKey } });
    const list = (await res.json()) as Array<{ aliases: string[]; buildStatus: string }>;
    const status = list.find((t) => t.aliases.includes(alias))?.buildStatus;
    if (status === 'ready') return;
    if (status === 'error') throw new Error(`template ${alias}: its build failed`);
    if (Date.now() > until) throw new Error(`template ${alias}: not built within ${ms / 1000} s (${status ?? 'not listed'})`);
    await new Promise((r) => setTimeout(r, 2_000));
  }
}

/** A POST with no client deadline: it waits as long as the server does. */
function postJson(url: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text || '{}') as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

after(async () => {
  await sbx?.kill().catch(() => { /* best effort: the platform's stop removes it anyway */ return false; });
  await p?.stop();
});

test('python: state kept between runs, the last value, stdout streamed before the run ends, an exception with its traceback', async () => {
  // As on E2B, code runs as root in /home/user.
  assert.equal((await sbx.runCode('import os, getpass; (getpass.getuser(), os.getcwd())')).text, "('root', '/home/user')");
  await sbx.runCode('x = 41');
  const r = await sbx.runCode('x + 1');
  assert.equal(r.text, '42');
  assert.equal(r.results[0]?.isMainResult, true);

  const seen: Array<{ line: string; at: number }> = [];
  const start = Date.now();
  const streamed = await sbx.runCode('import time\nprint("first", flush=True)\ntime.sleep(1.5)\nprint("second")', {
    onStdout: (m) => { seen.push({ line: m.line, at: Date.now() - start }); },
  });
  assert.deepEqual(streamed.logs.stdout, ['first\n', 'second\n']);
  const first = seen.find((s) => s.line.includes('first'));
  const second = seen.find((s) => s.line.includes('second'));
  assert.ok(first && second && second.at - first.at >= 1000, `first at ${first?.at} ms, second at ${second?.at} ms: the first came while the run went on`);

  const failed = await sbx.runCode('def f():\n    raise ValueError("bad value")\nf()');
  assert.equal(failed.error?.name, 'ValueError');
  assert.equal(failed.error?.value, 'bad value');
  assert.match(failed.error?.traceback ?? '', /f\(\)/);
  assert.equal((await sbx.runCode('x')).text, '41', 'the context goes on after an exception');
});

test('rich results: a matplotlib figure as PNG with its chart, a pandas DataFrame as HTML and data', async () => {
  const plot = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 4, 9])\nplt.title("growth")\nplt.show()');
  const png = plot.results.find((x) => x.png);
  assert.ok(png, JSON.stringify(plot.results.map((x) => x.formats())));
  assert.equal(Buffer.from(png.png!, 'base64').subarray(1, 4).toString(), 'PNG');
  assert.equal(png.chart?.type, 'line');
  assert.equal(png.chart?.title, 'growth');

  const table = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})');
  assert.match(table.results[0]?.html ?? '', /<table/);
  assert.deepEqual(table.results[0]?.data, { a: [1, 2], b: ['x', 'y'] });
});

test('contexts: two contexts keep their own variables; JavaScript; a run past its timeout is interrupted and its context goes on', async () => {
  const a = await sbx.createCodeContext();
  const b = await sbx.createCodeContext({ cwd: '/tmp' });
  await sbx.runCode('secret = "only in a"', { context: a });
  const inB = await sbx.runCode('secret', { context: b });
  assert.equal(inB.error?.name, 'NameError');
  assert.equal((await sbx.runCode('import os; os.getcwd()', { context: b })).text, '/tmp');
  assert.ok((await sbx.listCodeContexts()).some((c) => c.id === a.id));

  const js = await sbx.runCode('const n = [1, 2, 3].map((x) => x * 2); console.log("js says", n.length); n.reduce((s, x) => s + x, 0)', { language: 'js' });
  assert.equal(js.text, '12');
  assert.deepEqual(js.logs.stdout, ['js says 3\n']);

  await sbx.runCode('kept = "still here"', { context: a });
  const before = Date.now();
  await assert.rejects(sbx.runCode('import time\nwhile True: time.sleep(0.1)', { context: a, timeoutMs: 2_000 }), (e: Error) => e.name === 'TimeoutError');
  assert.ok(Date.now() - before < 10_000);
  const after = await sbx.runCode('kept', { context: a });
  assert.equal(after.text, 'still here', 'the interrupted context answers with its variables');

  await sbx.removeCodeContext(a);
  await assert.rejects(sbx.runCode('1', { context: a }), (e: Error) => /not found/i.test(e.message));
  await assert.rejects(sbx.runCode('1', { context: b, language: 'python' } as never), (e: Error) => /context|language/i.test(e.message));
});

test('calls to the code interpreter keep a sandbox with an idle timeout awake; silence lets it pause', async () => {
  const idle = await Sandbox.create({ timeoutMs: 6_000, lifecycle: { onTimeout: 'pause', autoResume: false } } as never);
  try {
    const end = Date.now() + 12_000;
    while (Date.now() < end) {
      assert.equal((await idle.runCode('1 + 1')).text, '2');
      await new Promise((r) => setTimeout(r, 2_000));
    }
    assert.equal((await idle.getInfo()).state, 'running', 'twelve seconds of calls, each within the six-second idle timeout');
    const stateOf = async () => (await fetch(`${p.apiUrl}/sandboxes/${idle.sandboxId}`, { headers: { 'X-API-Key': p.apiKey } }).then((r) => r.json() as Promise<{ state: string }>)).state;
    const until = Date.now() + 30_000;
    while ((await stateOf()) !== 'paused' && Date.now() < until) await new Promise((r) => setTimeout(r, 500));
    assert.equal(await stateOf(), 'paused');
  } finally {
    // A kill while the pause is still being finished is a 503 to retry (docs/api.md).
    for (let i = 0; i < 20 && !(await idle.kill().then(() => true, (e: Error) => e.name !== 'ServiceBusyError')); i++) await new Promise((r) => setTimeout(r, 500));
  }
});

test('our SDK and CLI: runCode streams and types its results; svc sandbox run-code prints them and fails on an error', async () => {
  const own = await SvcSandbox.create('code-interpreter-v1', { apiUrl: p.apiUrl, apiKey: p.apiKey, sandboxUrl: p.sandboxUrl, timeoutMs: 120_000 });
  try {
    const seen: string[] = [];
    const r = await own.runCode('print("from our sdk")\n6 * 7', { onStdout: (m) => { seen.push(m.line); } });
    assert.equal(r.text, '42');
    assert.deepEqual(seen, ['from our sdk\n']);
    const ctx = await own.createCodeContext({ language: 'bash' });
    assert.equal((await own.runCode('X=5; echo $((X * 2))', { context: ctx })).logs.stdout.join(''), '10\n');

    const cli = (...args: string[]) => new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
      execFile(process.execPath, [SVC_BIN, ...args], { env: { ...process.env, SVC_DATA_DIR: p.dataDir } },
        (err, stdout, stderr) => res({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
    });
    const ok = await cli('sandbox', 'run-code', own.sandboxId, 'print("from the cli")\n1 + 1');
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /from the cli\n[\s\S]*2/);
    const bad = await cli('sandbox', 'run-code', own.sandboxId, '1 / 0');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /ZeroDivisionError/);
  } finally {
    await own.kill();
  }
});
