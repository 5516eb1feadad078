/**
 * `svc sandbox` run as a child process against the fake API (and the envd double for exec, the
 * code interpreter double for run-code): JSON output, tables, exit codes and error lines. The
 * fixture is test-support/cli-fixture.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startFakeCodeInterpreter, type FakeCodeInterpreter } from '@svc/sdk/testing/fake-code-interpreter';
import { api, envd, json, run, startCliFixture, stopCliFixture, svcWithInput } from './test-support/cli-fixture.ts';

before(startCliFixture);
after(stopCliFixture);

describe('svc sandbox', () => {
  test('create sends the flags and prints JSON', async () => {
    const out = json(await run([
      'sandbox', 'create', '--template', 'base', '--timeout', '120', '--metadata', 'team=a', '--metadata', 'x=y=z',
      '--env', 'FOO=bar', '--on-timeout', 'pause', '--auto-resume', '--no-internet', '--private', '--json',
    ]));
    assert.deepEqual(api.lastCreate(), {
      templateID: 'base', timeout: 120, metadata: { team: 'a', x: 'y=z' }, envVars: { FOO: 'bar' }, allow_internet_access: false,
      network: { allowPublicTraffic: false }, lifecycle: { onTimeout: 'pause', autoResume: true },
    });
    assert.match(out.sandboxId, /^sbx-/);
    assert.equal(out.state, 'running');
    assert.ok(out.trafficAccessToken);
    assert.deepEqual(out.lifecycle, { onTimeout: 'pause', autoResume: true });
  });

  test('create with -1 never times out; human output is key: value lines', async () => {
    const r = await run(['sandbox', 'create', '--timeout', '-1']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(api.lastCreate()!.timeout, -1);
    assert.match(r.stdout, /^id:\s+sbx-/m);
    assert.match(r.stdout, /^ends:\s+never$/m);
  });

  test('list: table, JSON and filters', async () => {
    for (const id of [...api.sandboxes.keys()]) api.sandboxes.delete(id);
    const a = json(await run(['sandbox', 'create', '--metadata', 'env=prod', '--json']));
    const b = json(await run(['sandbox', 'create', '--metadata', 'env=dev', '--json']));
    json(await run(['sandbox', 'pause', b.sandboxId, '--json']));

    const table = await run(['sandbox', 'list']);
    assert.equal(table.code, 0);
    const lines = table.stdout.trim().split('\n');
    assert.match(lines[0], /^ID\s+TEMPLATE\s+STATE\s+STARTED\s+ENDS\s+METADATA$/);
    assert.equal(lines.length, 3);
    assert.ok(lines.some((l) => l.startsWith(a.sandboxId) && /running/.test(l) && /env=prod/.test(l)));

    const paused = json(await run(['sandbox', 'list', '--state', 'paused', '--json']));
    assert.deepEqual(paused.map((s: { sandboxId: string }) => s.sandboxId), [b.sandboxId]);
    const prod = json(await run(['--json', 'sandbox', 'list', '--metadata', 'env=prod']));
    assert.deepEqual(prod.map((s: { sandboxId: string }) => s.sandboxId), [a.sandboxId]);

    for (const id of [...api.sandboxes.keys()]) api.sandboxes.delete(id);
    assert.equal((await run(['sandbox', 'list'])).stdout.trim(), 'no sandboxes');
    assert.deepEqual(json(await run(['sandbox', 'list', '--json'])), []);
  });

  test('info, pause, connect, timeout, kill', async () => {
    const s = json(await run(['sandbox', 'create', '--json']));
    const id = s.sandboxId;
    assert.equal(json(await run(['sandbox', 'info', id, '--json'])).sandboxId, id);
    assert.deepEqual(json(await run(['sandbox', 'pause', id, '--json'])), { sandboxId: id, paused: true, alreadyPaused: false, keepMemory: true });
    const again = await run(['sandbox', 'pause', id]);
    assert.equal(again.code, 0);
    assert.match(again.stdout, /already paused/);
    const connected = json(await run(['sandbox', 'connect', id, '--timeout', '600', '--json']));
    assert.equal(connected.state, 'running');
    assert.equal(api.sandboxes.get(id)!.timeout, 600);
    assert.deepEqual(json(await run(['sandbox', 'timeout', id, '-1', '--json'])), { sandboxId: id, timeout: -1 });
    assert.equal(api.sandboxes.get(id)!.timeout, -1);
    assert.match((await run(['sandbox', 'timeout', id, '30'])).stdout, /times out after 30 idle seconds/);
    api.busyOnce.add(id);
    assert.deepEqual(json(await run(['sandbox', 'kill', id, '--json'])), { sandboxId: id, killed: true }, 'a 503 while pausing is retried');
    assert.equal(api.busyOnce.has(id), false);

    const gone = await run(['sandbox', 'kill', id]);
    assert.equal(gone.code, 1);
    assert.equal(gone.stdout, '');
    assert.equal(gone.stderr, `svc: sandbox ${id} not found\n`);
    const info = await run(['sandbox', 'info', id]);
    assert.equal(info.code, 1);
    assert.equal(info.stderr.trim().split('\n').length, 1, 'one line');
    assert.match(info.stderr, /^svc: .*not found \(HTTP 404\)$/m);
  });

  test('exec streams output and exits with the command exit code', async () => {
    const s = json(await run(['sandbox', 'create', '--json']));
    const ok = await run(['--sandbox-url', envd.url, 'sandbox', 'exec', s.sandboxId, '--', 'echo', 'hello world', ';x']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout, 'hello world ;x\n', 'several words are quoted one by one');
    const failing = await run(['--sandbox-url', envd.url, 'sandbox', 'exec', s.sandboxId, '--', 'echo out; echo err >&2; exit 3']);
    assert.equal(failing.code, 3);
    assert.equal(failing.stdout, 'out\n');
    assert.equal(failing.stderr, 'err\n');
    const asJson = await run(['--sandbox-url', envd.url, '--json', 'sandbox', 'exec', s.sandboxId, '--env', 'FOO=1', '--', 'echo $FOO; exit 4']);
    assert.equal(asJson.code, 4);
    assert.deepEqual(JSON.parse(asJson.stdout), { exitCode: 4, stdout: '1\n', stderr: '' });
    const start = envd.requests.findLast((r) => r.path === '/process.Process/Start')!;
    assert.equal(start.headers['e2b-sandbox-id'], s.sandboxId);
    assert.equal(start.headers['x-access-token'], api.sandboxes.get(s.sandboxId)!.envdAccessToken);
  });

  describe('run-code (against the code interpreter double)', () => {
    let ci: FakeCodeInterpreter;
    let sandboxId: string;
    before(async () => {
      ci = await startFakeCodeInterpreter();
      sandboxId = json(await run(['sandbox', 'create', '--json'])).sandboxId;
    });
    after(() => ci.close());
    const runCode = (args: string[], input?: string) => svcWithInput(
      ['--sandbox-url', ci.url, 'sandbox', 'run-code', sandboxId, ...args],
      { SVC_API_URL: api.url, SVC_API_KEY: 'key-1' },
      input,
    );
    const stamp = '2026-01-02T03:04:05.678Z';

    test('streams output, prints results (binary ones as a note) and the traceback; exit 1 on an error', async () => {
      ci.onExecute = (_req, answer) => {
        answer.line({ type: 'stdout', text: 'hello\n', timestamp: stamp });
        answer.line({ type: 'stderr', text: 'careful\n', timestamp: stamp });
        answer.line({ type: 'result', text: '<Figure size 640x480>', png: Buffer.alloc(2048).toString('base64'), is_main_result: false });
        answer.line({ type: 'result', html: '<b>x</b>', is_main_result: false });
        answer.line({ type: 'result', text: '42', is_main_result: true });
        answer.line({ type: 'error', name: 'ValueError', value: 'bad', traceback: 'Traceback (most recent call last):\nValueError: bad' });
        answer.end();
      };
      const r = await runCode(['x = 1', '--language', 'python', '--env', 'A=1', '--timeout', '5']);
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stdout, 'hello\n<Figure size 640x480>\n[image/png 2.0 KiB]\n[text/html]\n42\n');
      assert.equal(r.stderr, 'careful\nTraceback (most recent call last):\nValueError: bad\n');
      const req = ci.requests.at(-1)!;
      assert.deepEqual(req.body, { code: 'x = 1', language: 'python', env_vars: { A: '1' } });
      assert.equal(req.headers['e2b-sandbox-id'], sandboxId);
      assert.equal(req.headers['e2b-sandbox-port'], '49999');
      assert.equal(req.headers['x-access-token'], api.sandboxes.get(sandboxId)!.envdAccessToken);
    });

    test('--json prints the whole execution; code from stdin', async () => {
      ci.onExecute = (req, answer) => {
        answer.line({ type: 'stdout', text: `ran ${req.code}`, timestamp: stamp });
        answer.line({ type: 'result', text: '2', is_main_result: true });
        answer.line({ type: 'number_of_executions', execution_count: 3 });
        answer.end();
      };
      const r = await runCode(['--json', '--context', 'ctx-1'], 'print(1)\n1 + 1\n');
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), {
        results: [{ text: '2', isMainResult: true }], logs: { stdout: ['ran print(1)\n1 + 1\n'], stderr: [] }, executionCount: 3, text: '2',
      });
      assert.deepEqual(ci.requests.at(-1)!.body, { code: 'print(1)\n1 + 1\n', context_id: 'ctx-1' });
      const dash = await runCode(['-', '--json'], 'from stdin');
      assert.equal(JSON.parse(dash.stdout).logs.stdout[0], 'ran from stdin');
    });

    test('--language with --context is a usage error; an unknown context exits 1 with the service\'s message', async () => {
      const both = await runCode(['1', '--language', 'python', '--context', 'c']);
      assert.equal(both.code, 2);
      assert.match(both.stderr, /^svc: --language and --context/);
      ci.onExecute = (_req, answer) => answer.fail(404, 'Context nope not found');
      const missing = await runCode(['1', '--context', 'nope']);
      assert.equal(missing.code, 1);
      assert.equal(missing.stderr, 'svc: Context nope not found (HTTP 404)\n');
    });
  });

  test('usage errors exit 2 with one line', async () => {
    for (const args of [
      ['sandbox', 'info'],
      ['sandbox', 'create', '--timeout', 'soon'],
      ['sandbox', 'create', '--timeout', '-5'],
      ['sandbox', 'create', '--metadata', 'novalue'],
      ['sandbox', 'create', '--on-timeout', 'explode'],
      ['sandbox', 'list', '--state', 'sleeping'],
      ['sandbox', 'frobnicate'],
      ['bogus'],
    ]) {
      const r = await run(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^svc: /, args.join(' '));
      assert.equal(r.stderr.trim().split('\n').length, 1, `${args.join(' ')}: ${r.stderr}`);
    }
  });
});
