/**
 * The code interpreter driven over HTTP as the official SDK drives it, against real kernels:
 * Debian's python3-ipykernel (with numpy, pandas, matplotlib), the host's node and bash.
 * Kernels are shared between tests where they can be (each Python kernel costs a second or two).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { CodeContext, ExecutionLine, ResultLine } from '@svc/contracts/code-interpreter';
import { createCodeInterpreter, type CodeInterpreter } from './server.ts';

let interpreter: CodeInterpreter;
let fakeEnvd: Server;
let base: string;
let workDir: string;
const envdTokens: Array<string | undefined> = [];

before(async () => {
  workDir = realpathSync(mkdtempSync(join(tmpdir(), 'svc-ci-test-')));
  // envd's /envs: the sandbox's own variables, which an execution's env_vars are restored to.
  fakeEnvd = createServer((req, res) => {
    envdTokens.push(req.headers['x-access-token'] as string | undefined);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ SVC_TEST_GLOBAL: 'from-envd', SVC_TEST_SHARED: 'global' }));
  });
  await new Promise<void>((r) => fakeEnvd.listen(0, '127.0.0.1', r));
  const envdPort = (fakeEnvd.address() as { port: number }).port;
  interpreter = createCodeInterpreter({ log: () => {}, defaultCwd: workDir, envdEnvsUrl: `http://127.0.0.1:${envdPort}/envs`, keepaliveMs: 200 });
  await new Promise<void>((r) => interpreter.server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(interpreter.server.address() as { port: number }).port}`;
  await interpreter.warmUp();
});

after(async () => {
  await interpreter.close();
  await new Promise<void>((r) => fakeEnvd.close(() => r()));
  rmSync(workDir, { recursive: true, force: true });
});

interface Run {
  status: number;
  lines: ExecutionLine[];
  body: string;
}

/** POST /execute and read the NDJSON answer line by line, as the SDK's readLines does. */
async function execute(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Run> {
  const res = await fetch(`${base}/execute`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  if (res.status !== 200) return { status: res.status, lines: [], body: text };
  const lines = text.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as ExecutionLine);
  assert.deepEqual(lines.at(-1), { type: 'end_of_execution' }, 'end_of_execution comes last');
  return { status: 200, lines, body: text };
}

const of = <T extends ExecutionLine['type']>(run: Run, type: T) => run.lines.filter((l): l is Extract<ExecutionLine, { type: T }> => l.type === type);
const stdout = (run: Run) => of(run, 'stdout').map((l) => l.text).join('');
const mainText = (run: Run) => of(run, 'result').find((r) => r.is_main_result)?.text;
const errorOf = (run: Run) => of(run, 'error')[0];

async function createContext(body: Record<string, unknown>): Promise<CodeContext> {
  const res = await fetch(`${base}/contexts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as CodeContext;
}

test('GET /health answers OK', async () => {
  const res = await fetch(`${base}/health`);
  assert.equal(res.status, 200);
  assert.equal(await res.json(), 'OK');
});

test('GET /contexts waits for the default contexts while they start, and lists them; /health answers at once', async () => {
  const starting = createCodeInterpreter({ log: () => {}, defaultCwd: workDir, envdEnvsUrl: 'http://127.0.0.1:9/envs' });
  await new Promise<void>((r) => starting.server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(starting.server.address() as { port: number }).port}`;
  try {
    void starting.warmUp();
    assert.equal((await fetch(`${url}/health`)).status, 200);
    const listed = (await (await fetch(`${url}/contexts`)).json()) as CodeContext[];
    assert.deepEqual(listed.map((c) => c.language).sort(), ['javascript', 'python']);
  } finally {
    await starting.close();
  }
});


test('python: print is stdout with timestamps, the last expression the main result, variables persist', async () => {
  const first = await execute({ code: 'x = 40\nprint("hello")\nprint("to stderr", file=__import__("sys").stderr)\nx + 2' }, { 'X-Access-Token': 'token-1' });
  assert.equal(first.status, 200);
  assert.equal(stdout(first), 'hello\n');
  assert.equal(of(first, 'stderr').map((l) => l.text).join(''), 'to stderr\n');
  for (const line of [...of(first, 'stdout'), ...of(first, 'stderr')]) assert.ok(!Number.isNaN(Date.parse(line.timestamp)), line.timestamp);
  assert.equal(mainText(first), '42');
  const count = of(first, 'number_of_executions')[0];
  assert.ok(count && count.execution_count >= 1);

  const second = await execute({ code: 'x * 2' });
  assert.equal(mainText(second), '80');
  assert.equal(of(second, 'number_of_executions')[0].execution_count, count.execution_count + 1);
  assert.equal(mainText(await execute({ code: '"a string"' })), 'a string', 'the quotes of a string repr are dropped');
});

test('python: display(DataFrame) gives data and html; a plot gives png and a line chart', async () => {
  const frame = await execute({ code: 'import pandas as pd\ndf = pd.DataFrame({"n": [1, 2], "when": pd.to_datetime(["2024-01-01", "2024-02-01"])})\ndisplay(df)' });
  const shown = of(frame, 'result');
  assert.equal(shown.length, 1);
  assert.equal(shown[0].is_main_result, false);
  assert.deepEqual(shown[0].data, { n: [1, 2], when: ['2024-01-01T00:00:00', '2024-02-01T00:00:00'] });
  assert.match(shown[0].html ?? '', /<table/);

  const plot = await execute({ code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 4, 8], label="growth")\nplt.title("Growth")\nplt.xlabel("time (s)")\nplt.show()' });
  const figure = of(plot, 'result')[0] as ResultLine;
  assert.ok(figure.png && Buffer.from(figure.png, 'base64').subarray(1, 4).toString() === 'PNG', 'a base64 PNG');
  const chart = figure.chart as { type: string; title: string; x_label: string; x_unit: string; elements: Array<{ label: string; points: number[][] }> };
  assert.equal(chart.type, 'line');
  assert.equal(chart.title, 'Growth');
  assert.equal(chart.x_label, 'time (s)');
  assert.equal(chart.x_unit, 's');
  assert.deepEqual(chart.elements, [{ label: 'growth', points: [[1, 2], [2, 4], [3, 8]] }]);

  const more = await execute({ code: [
    'plt.figure()\nplt.bar(["A", "B"], [100, 200], label="Sold")\nplt.ylabel("Books [count]")',
    'plt.figure()\nplt.pie([90, 10], labels=["No", "Yes"])',
    'fig, ax = plt.subplots()\nax.add_artist(plt.Circle((0, 0), 1))\nax.set_title("Circles")',
    'plt.show()',
  ].join('\n') });
  const [bar, pie, unknown] = of(more, 'result').map((r) => r.chart);
  assert.deepEqual(bar, { type: 'bar', title: null, x_label: null, y_label: 'Books [count]', x_unit: null, y_unit: 'count', elements: [{ label: 'A', value: 100, group: 'Sold' }, { label: 'B', value: 200, group: 'Sold' }] });
  assert.deepEqual(pie, { type: 'pie', title: null, elements: [{ label: 'No', angle: 324, radius: 1 }, { label: 'Yes', angle: 36, radius: 1 }] });
  assert.deepEqual(unknown, { type: 'unknown', title: 'Circles', elements: [] });
});

test('python: an exception is an error line with name, value and traceback; the context goes on', async () => {
  await execute({ code: 'kept = "still here"' });
  const run = await execute({ code: 'def f():\n    return 1 / 0\nf()' });
  const error = errorOf(run);
  assert.equal(error.name, 'ZeroDivisionError');
  assert.equal(error.value, 'division by zero');
  assert.match(error.traceback, /ZeroDivisionError/);
  assert.match(error.traceback, /return 1 \/ 0/);
  assert.doesNotMatch(error.traceback, /\u001b\[/, 'no colour codes');
  assert.equal(mainText(await execute({ code: 'kept' })), 'still here');
});

test('bad requests: both context_id and language, bad JSON, no code, an unknown language', async () => {
  const both = await execute({ code: '1', language: 'python', context_id: 'x' });
  assert.equal(both.status, 400);
  assert.deepEqual(JSON.parse(both.body), { code: 400, message: 'Only one of context_id or language can be provided' });
  const badJson = await fetch(`${base}/execute`, { method: 'POST', body: '{"code": ' });
  assert.equal(badJson.status, 400);
  assert.equal(((await badJson.json()) as { code: number }).code, 400);
  assert.equal((await execute({ language: 'python' })).status, 400);
  assert.equal((await execute({ code: 5 })).status, 400);
  const r = await execute({ code: 'x <- 1', language: 'r' });
  assert.equal(r.status, 400);
  assert.match(JSON.parse(r.body).message, /python, javascript, typescript, bash/);
  const ctx = await fetch(`${base}/contexts`, { method: 'POST', body: JSON.stringify({ language: 'java' }) });
  assert.equal(ctx.status, 400);
  assert.equal((await execute({ code: '1', env_vars: { 'NOT-A-NAME': 'x' } })).status, 400);
});

test('an unknown context is a 404 on execute, delete and restart', async () => {
  const run = await execute({ code: '1', context_id: 'no-such-context' });
  assert.equal(run.status, 404);
  assert.deepEqual(JSON.parse(run.body), { code: 404, message: 'Context no-such-context not found' });
  assert.equal((await fetch(`${base}/contexts/no-such-context`, { method: 'DELETE' })).status, 404);
  assert.equal((await fetch(`${base}/contexts/no-such-context/restart`, { method: 'POST' })).status, 404);
});

test('python contexts: own variables and cwd, restart clears variables, a killed kernel ends the run and restarts', async () => {
  await execute({ code: 'only_in_default = 1' });
  const dir = mkdtempSync(join(workDir, 'ctx-'));
  const ctx = await createContext({ language: 'python', cwd: dir });
  assert.deepEqual({ language: ctx.language, cwd: ctx.cwd }, { language: 'python', cwd: dir });
  const listed = (await (await fetch(`${base}/contexts`)).json()) as CodeContext[];
  assert.ok(listed.some((c) => c.id === ctx.id && c.cwd === dir));
  for (const language of ['python', 'javascript']) assert.ok(listed.some((c) => c.language === language), `the ${language} default context is listed`);

  assert.equal(errorOf(await execute({ code: 'only_in_default', context_id: ctx.id })).name, 'NameError', 'variables do not cross contexts');
  assert.equal(mainText(await execute({ code: 'import os\nos.getcwd()', context_id: ctx.id })), dir);

  await execute({ code: 'mine = 5', context_id: ctx.id });
  const restarted = await fetch(`${base}/contexts/${ctx.id}/restart`, { method: 'POST' });
  assert.equal(restarted.status, 204);
  assert.equal(errorOf(await execute({ code: 'mine', context_id: ctx.id })).name, 'NameError', 'a restart clears variables');
  assert.equal(mainText(await execute({ code: 'import os\nos.getcwd()', context_id: ctx.id })), dir, 'and keeps the cwd');

  const killed = await execute({ code: 'import os, signal\nprint("before", flush=True)\nos.kill(os.getpid(), signal.SIGKILL)', context_id: ctx.id });
  assert.equal(killed.status, 200);
  assert.ok(of(killed, 'unexpected_end_of_execution').length === 1, killed.body);
  assert.equal(errorOf(killed).name, 'UnexpectedEndOfExecution');
  assert.equal((await fetch(`${base}/contexts/${ctx.id}/restart`, { method: 'POST' })).status, 204);
  assert.equal(mainText(await execute({ code: '6 * 7', context_id: ctx.id })), '42');

  assert.equal((await fetch(`${base}/contexts/${ctx.id}`, { method: 'DELETE' })).status, 204);
  const after = (await (await fetch(`${base}/contexts`)).json()) as CodeContext[];
  assert.ok(!after.some((c) => c.id === ctx.id));
  assert.equal((await execute({ code: '1', context_id: ctx.id })).status, 404);
});

test('env_vars are set for one execution, then put back to the sandbox value from envd or removed', async () => {
  const code = 'import os\nprint(os.environ.get("SVC_TEST_SHARED"), os.environ.get("SVC_TEST_OWN"), os.environ.get("SVC_TEST_GLOBAL"))';
  const during = await execute({ code, env_vars: { SVC_TEST_SHARED: 'mine', SVC_TEST_OWN: "it's mine" } });
  assert.equal(stdout(during), "mine it's mine from-envd\n");
  // The environment is read once, with the first request's token; the access check (access.ts)
  // asks the same route with each new request's token, none here after the first.
  assert.deepEqual([...new Set(envdTokens)], ['token-1', undefined]);
  assert.equal(stdout(await execute({ code })), 'global None from-envd\n');

  const bash = await execute({ code: 'echo "$SVC_TEST_SHARED ${SVC_TEST_OWN-unset}"', language: 'bash', env_vars: { SVC_TEST_SHARED: 'b', SVC_TEST_OWN: 'o' } });
  assert.equal(stdout(bash), 'b o\n');
  assert.equal(stdout(await execute({ code: 'echo "$SVC_TEST_SHARED ${SVC_TEST_OWN-unset}"', language: 'bash' })), 'global unset\n');
  const js = await execute({ code: 'process.env.SVC_TEST_OWN', language: 'javascript', env_vars: { SVC_TEST_OWN: 'j' } });
  assert.equal(mainText(js), 'j', 'a string result loses its quotes, as in Python');
  assert.equal(mainText(await execute({ code: 'String(process.env.SVC_TEST_OWN)', language: 'javascript' })), 'undefined');
});

test('a run the client gives up on is interrupted; the context keeps its variables', async () => {
  await execute({ code: 'survivor = "alive"' });
  const controller = new AbortController();
  const res = await fetch(`${base}/execute`, { method: 'POST', body: JSON.stringify({ code: 'import time\nfor _ in range(600):\n    time.sleep(0.1)' }), signal: controller.signal });
  const reader = res.body!.getReader();
  // Wait until the kernel has the code (its execution count), then go away like a timed-out SDK.
  let seen = '';
  while (!seen.includes('number_of_executions')) seen += new TextDecoder().decode((await reader.read()).value);
  controller.abort();
  const started = Date.now();
  const next = await execute({ code: 'survivor' });
  assert.equal(mainText(next), 'alive');
  assert.ok(Date.now() - started < 5_000, 'the next run is not held up by the abandoned one');

  const stuck = [
    ['javascript', 'globalThis.jsKept = 1; while (true) {}', 'jsKept'],
    ['javascript', 'const awaitedKept = 1; await new Promise(() => {})', 'awaitedKept'],
    ['bash', 'BASH_KEPT=1; sleep 60', 'echo $BASH_KEPT'],
  ] as const;
  for (const [language, loop, check] of stuck) {
    const c = new AbortController();
    const r = await fetch(`${base}/execute`, { method: 'POST', body: JSON.stringify({ code: loop, language }), signal: c.signal });
    const rd = r.body!.getReader();
    let got = '';
    while (!got.includes('number_of_executions')) got += new TextDecoder().decode((await rd.read()).value);
    await new Promise((resolve) => setTimeout(resolve, 100));
    c.abort();
    const after = await execute({ code: check, language });
    assert.equal(mainText(after) ?? stdout(after).trim(), '1', `${language} keeps its state after an interrupt of ${loop}`);
  }
});

test('executions in one context run one at a time, with keepalive lines while waiting', async () => {
  const slow = execute({ code: 'import time\ntime.sleep(0.8)\norder = "a"' });
  await new Promise((resolve) => setTimeout(resolve, 100));
  const queued = execute({ code: 'order += "b"\norder' });
  const [first, second] = await Promise.all([slow, queued]);
  assert.equal(errorOf(first), undefined);
  assert.equal(mainText(second), 'ab');
  assert.ok(of(first, 'keepalive').length + of(second, 'keepalive').length > 0, 'keepalive lines were sent');
});

test('javascript: variables persist, console output, the last value, top-level await, errors', async () => {
  const first = await execute({ code: 'const greeting = "hi";\nconsole.log(greeting, 1);\nconsole.error("oops");\n({ a: 1 })', language: 'js' });
  assert.equal(stdout(first), 'hi 1\n');
  assert.equal(of(first, 'stderr').map((l) => l.text).join(''), 'oops\n');
  assert.equal(mainText(first), '{ a: 1 }');
  assert.equal(of(first, 'result')[0].is_main_result, true);
  const awaited = await execute({ code: 'const later = await new Promise((r) => setTimeout(() => r(greeting + "!"), 20));\nlater', language: 'javascript' });
  assert.equal(mainText(awaited), 'hi!');
  assert.equal(mainText(await execute({ code: 'later.length', language: 'javascript' })), '3', 'an awaited declaration persists');
  const failed = await execute({ code: 'function boom() { throw new TypeError("bad thing") }\nboom()', language: 'javascript' });
  const error = errorOf(failed);
  assert.deepEqual({ name: error.name, value: error.value }, { name: 'TypeError', value: 'bad thing' });
  assert.match(error.traceback, /TypeError: bad thing\n\s+at boom/);
  assert.equal(mainText(await execute({ code: 'greeting', language: 'javascript' })), 'hi');
  assert.equal(errorOf(await execute({ code: 'let (', language: 'javascript' })).name, 'SyntaxError');
  const imported = await execute({ code: "import { join } from 'node:path'\nimport * as os from 'node:os'\ntypeof os.tmpdir", language: 'javascript' });
  assert.equal(mainText(imported), 'function', imported.body);
  assert.equal(mainText(await execute({ code: 'join("a", "b")', language: 'javascript' })), 'a/b', 'an imported name persists');
});

test('typescript: type annotations and interfaces are compiled away', async () => {
  const run = await execute({ code: 'interface Point { x: number }\nconst p: Point = { x: 21 };\nfunction double(n: number): number { return n * 2 }\ndouble(p.x)', language: 'ts' });
  assert.equal(errorOf(run), undefined, run.body);
  assert.equal(mainText(run), '42');
  assert.equal(mainText(await execute({ code: 'p.x as number', language: 'typescript' })), '21');
});

test('bash: variables and cd persist, a failing command is an error', async () => {
  const dir = mkdtempSync(join(workDir, 'bash-'));
  const ctx = await createContext({ language: 'bash' });
  assert.equal(ctx.cwd, workDir);
  assert.equal(stdout(await execute({ code: `NAME=world\ncd ${dir}\necho "hello $NAME"`, context_id: ctx.id })), 'hello world\n');
  assert.equal(stdout(await execute({ code: 'echo "$NAME"; pwd', context_id: ctx.id })), `world\n${dir}\n`);
  const failed = await execute({ code: 'ls /no/such/dir', context_id: ctx.id });
  assert.match(of(failed, 'stderr').map((l) => l.text).join(''), /no\/such\/dir/);
  assert.deepEqual({ name: errorOf(failed).name, value: errorOf(failed).value }, { name: 'ExitStatus', value: '2' });
  assert.equal(stdout(await execute({ code: 'printf "no newline"', context_id: ctx.id })), 'no newline');
  assert.equal(stdout(await execute({ code: 'read line; echo "read: $line"', context_id: ctx.id })), 'read: \n', 'stdin is empty');
  assert.equal((await fetch(`${base}/contexts/${ctx.id}`, { method: 'DELETE' })).status, 204);
});

test('python: an image Pillow saves to a file is shown as well, as E2B\'s kernels do', async () => {
  const run = await execute({ code: `from PIL import Image\nImage.new("RGB", (4, 4)).save("${workDir}/saved.png")\nprint("saved")` });
  assert.equal(stdout(run), 'saved\n');
  const png = of(run, 'result').find((r) => r.png);
  assert.ok(png, JSON.stringify(run.lines));
  assert.equal(Buffer.from(png.png!, 'base64').subarray(1, 4).toString(), 'PNG');
});

test('a secured sandbox: /execute runs only with the token envd takes (401 without or with another; 503 when envd does not answer)', async () => {
  let envdUp = true;
  const securedEnvd = createServer((req, res) => {
    if (!envdUp) return void req.socket.destroy();
    const ok = req.headers['x-access-token'] === 'the-envd-token';
    res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
    res.end(ok ? '{}' : '{"code":401,"message":"unauthorized"}');
  });
  await new Promise<void>((r) => securedEnvd.listen(0, '127.0.0.1', r));
  const secured = createCodeInterpreter({ log: () => {}, defaultCwd: workDir, envdEnvsUrl: `http://127.0.0.1:${(securedEnvd.address() as { port: number }).port}/envs`, keepaliveMs: 200 });
  await new Promise<void>((r) => secured.server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(secured.server.address() as { port: number }).port}`;
  const run = (headers: Record<string, string>) => fetch(`${url}/execute`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ code: 'echo ran', language: 'bash' }),
  });
  try {
    for (const headers of [{}, { 'X-Access-Token': 'a-guess' }, { 'X-Access-Token': '' }] as Array<Record<string, string>>) {
      const refused = await run(headers);
      assert.equal(refused.status, 401, JSON.stringify(headers));
      assert.match(((await refused.json()) as { message: string }).message, /send its envd access token as X-Access-Token/);
    }
    const ok = await run({ 'X-Access-Token': 'the-envd-token' });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /ran/);
    envdUp = false;
    assert.equal((await run({ 'X-Access-Token': 'another-guess' })).status, 503, 'envd not answering refuses, never lets through');
    assert.equal((await run({ 'X-Access-Token': 'the-envd-token' })).status, 200, 'a token envd took moments ago is taken again without asking');
  } finally {
    await secured.close();
    await new Promise<void>((r) => securedEnvd.close(() => r()));
  }
});
