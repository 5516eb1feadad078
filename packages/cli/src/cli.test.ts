/**
 * The `svc` CLI run as a child process against the fake API (and the envd double for exec, the
 * code interpreter double for run-code): JSON output, tables, exit codes and error lines.
 * Snapshots, fork, logs and the pause kinds run against the real gateway and master over the
 * master's fake node agent.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { build } from 'esbuild';
import { startFakeApi, type FakeApi } from '@svc/sdk/testing/fake-api';
import { startFakeCodeInterpreter, type FakeCodeInterpreter } from '@svc/sdk/testing/fake-code-interpreter';
import { startFakeEnvd, type FakeEnvd } from '@svc/sdk/testing/fake-envd';
import { startGatewayOverFakeNode, type GatewayOverFakeNode } from '@svc/sdk/testing/gateway-over-fake-node';
import { ErrorCodes } from '@svc/common';

const MAIN = resolve(import.meta.dirname, 'main.ts');
const BIN = resolve(import.meta.dirname, '../bin/svc.mjs');

interface Run { code: number; stdout: string; stderr: string }

let api: FakeApi;
let envd: FakeEnvd;
let home: string;
/** The CLI bundled as `npm run build` does: a child process of it starts in a fraction of tsx's time. */
let bundle: string;

async function bundleCli(dir: string): Promise<string> {
  const outfile = join(dir, 'svc.mjs');
  await build({
    entryPoints: [MAIN], outfile, bundle: true, platform: 'node', target: 'node20', format: 'esm', logLevel: 'silent',
    banner: { js: "import { createRequire as __r } from 'node:module'; const require = __r(import.meta.url);" },
    plugins: [{
      // `svc up` is not under test here; leave the platform out of the bundle
      name: 'leave-out-up',
      setup(b) {
        b.onResolve({ filter: /\/up\.ts$/ }, (a) => ({ path: resolve(a.resolveDir, a.path), external: true }));
        // nor the components `svc master` and the like run (component-main.test.ts runs them)
        b.onResolve({ filter: /^@svc\/[a-z-]+\/component$/ }, (a) => ({ path: a.path, external: true }));
      },
    }],
  });
  return outfile;
}

function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, SVC_POLL_INTERVAL_MS: '20' };
  return { ...env, ...extra };
}

function svc(args: string[], env: Record<string, string> = {}, entry: string[] = [bundle]): Promise<Run> {
  return new Promise((res) => {
    execFile(process.execPath, [...entry, ...args], { env: baseEnv(env), cwd: resolve(import.meta.dirname, '../../..') }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      res({ code, stdout, stderr });
    });
  });
}

/** As svc, with `input` on its standard input (closed at once without it). */
function svcWithInput(args: string[], env: Record<string, string>, input?: string): Promise<Run> {
  return new Promise((res) => {
    const child = execFile(process.execPath, [bundle, ...args], { env: baseEnv(env) }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      res({ code, stdout, stderr });
    });
    child.stdin!.end(input ?? '');
  });
}

/** Runs against the fake API with the key in the environment. */
const run = (args: string[], env: Record<string, string> = {}) =>
  svc(args, { SVC_API_URL: api.url, SVC_API_KEY: 'key-1', ...env });

const json = (r: Run) => {
  assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
};

before(async () => {
  api = await startFakeApi({ apiKey: 'key-1' });
  envd = await startFakeEnvd();
  home = mkdtempSync(join(tmpdir(), 'svc-cli-home-'));
  bundle = await bundleCli(home);
});
after(async () => {
  await api.close();
  await envd.close();
  rmSync(home, { recursive: true, force: true });
});

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

describe('svc sandbox snapshot|fork|logs, svc snapshot, pause kinds (real gateway over the fake node)', () => {
  let gw: GatewayOverFakeNode;
  before(async () => { gw = await startGatewayOverFakeNode({ apiKey: 'key-2' }); });
  after(() => gw?.close());
  const runGw = (args: string[]) => svc(args, { SVC_API_URL: gw.url, SVC_API_KEY: 'key-2' });
  const created = async () => json(await runGw(['sandbox', 'create', '--json'])).sandboxId as string;

  test('snapshot prints the id; snapshot list (table, JSON, filters); create from one; delete', async () => {
    const id = await created();
    const named = await runGw(['sandbox', 'snapshot', id, '--name', 'cli-snap']);
    assert.equal(named.code, 0, named.stderr);
    assert.equal(named.stdout, 'cli-snap\n');
    const unnamed = json(await runGw(['sandbox', 'snapshot', id, '--json']));
    assert.match(unnamed.snapshotId, /^snap-/);
    assert.deepEqual(unnamed.names, []);

    const listed = json(await runGw(['snapshot', 'list', '--sandbox', id, '--json']));
    assert.deepEqual(listed.map((x: { snapshotId: string }) => x.snapshotId).sort(), ['cli-snap', unnamed.snapshotId].sort());
    assert.deepEqual(json(await runGw(['snapshot', 'list', '--name', 'cli-snap', '--json'])), [{ snapshotId: 'cli-snap', names: ['cli-snap'] }]);
    const table = await runGw(['snapshot', 'ls']);
    assert.match(table.stdout, /^SNAPSHOT\s+NAMES$/m);
    assert.match(table.stdout, /^cli-snap\s+cli-snap$/m);
    assert.match(table.stdout, new RegExp(`^${unnamed.snapshotId}\\s+-$`, 'm'));

    const child = json(await runGw(['sandbox', 'create', '--template', 'cli-snap', '--json']));
    assert.equal(child.state, 'running');

    assert.deepEqual(json(await runGw(['snapshot', 'delete', 'cli-snap', '--json'])), { snapshotId: 'cli-snap', deleted: true });
    const again = await runGw(['snapshot', 'delete', 'cli-snap']);
    assert.equal(again.code, 1);
    assert.equal(again.stderr, 'svc: snapshot cli-snap not found\n');
    const template = await runGw(['snapshot', 'rm', 'base']);
    assert.equal(template.code, 1);
    assert.equal(template.stderr, 'svc: snapshot base not found\n');
    assert.match((await runGw(['snapshot', 'delete', unnamed.snapshotId])).stdout, /^deleted snap-/);
    assert.equal((await runGw(['snapshot', 'list', '--sandbox', id])).stdout.trim(), 'no snapshots');
  });

  test('snapshot: an unknown sandbox, a bad name, an empty name', async () => {
    const unknown = await runGw(['sandbox', 'snapshot', 'sbx-missing']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^svc: .*not found.* \(HTTP 404\)\n$/);
    const id = await created();
    const bad = await runGw(['sandbox', 'snapshot', id, '--name', 'bad name!']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^svc: .*name.*\(HTTP 400\)\n$/);
    const empty = await runGw(['sandbox', 'snapshot', id, '--name', '']);
    assert.equal(empty.code, 2);
    assert.equal(empty.stderr, 'svc: --name must not be empty\n');
  });

  test('fork prints one id per fork; failures go to stderr and exit 1; bad counts and unknown sandboxes', async () => {
    const id = await created();
    const two = await runGw(['sandbox', 'fork', id, '--count', '2', '--timeout', '120']);
    assert.equal(two.code, 0, two.stderr);
    const ids = two.stdout.trim().split('\n');
    assert.equal(ids.length, 2);
    assert.equal(new Set([...ids, id]).size, 3);
    for (const f of ids) {
      const info = json(await runGw(['sandbox', 'info', f, '--json']));
      assert.equal(info.state, 'running');
      assert.equal(info.timeout, 120);
    }
    const one = json(await runGw(['sandbox', 'fork', id, '--json']));
    assert.equal(one.length, 1);
    assert.ok(one[0].sandboxId && !ids.includes(one[0].sandboxId));

    for (const count of ['0', '11']) {
      const r = await runGw(['sandbox', 'fork', id, '--count', count]);
      assert.equal(r.code, 1, `--count ${count}`);
      assert.match(r.stderr, /^svc: .*count.*\(HTTP 400\)\n$/, `--count ${count}`);
    }
    const word = await runGw(['sandbox', 'fork', id, '--count', 'two']);
    assert.equal(word.code, 2);
    assert.match(word.stderr, /^svc: --count must be a whole number/);
    const unknown = await runGw(['sandbox', 'fork', 'sbx-missing']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /\(HTTP 404\)\n$/);

    gw.m.node.behaviour.failCreate = true;
    try {
      const failed = await runGw(['sandbox', 'fork', id, '--count', '2']);
      assert.equal(failed.code, 1);
      assert.equal(failed.stdout, '');
      const lines = failed.stderr.trim().split('\n');
      assert.equal(lines.length, 2, failed.stderr);
      assert.match(lines[0], /^svc: fork 1 of 2 did not start: .*\(HTTP 5\d\d/);
      assert.match(lines[1], /^svc: fork 2 of 2 did not start: /);
      const asJson = await runGw(['sandbox', 'fork', id, '--json']);
      assert.equal(asJson.code, 1);
      const entries = JSON.parse(asJson.stdout);
      assert.equal(entries.length, 1);
      assert.ok(entries[0].error.message);
      assert.ok(entries[0].error.status >= 500);
      assert.equal(asJson.stderr, 'svc: 1 of 1 forks did not start\n');
    } finally {
      gw.m.node.behaviour.failCreate = false;
    }
  });

  test('logs: one line an entry, oldest first; --json, --level, --newest-first, --limit; unknown sandboxes and bad flags', async () => {
    const id = await created();
    const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
    gw.m.node.logs.set(id, [
      { timestamp: at(0), level: 'info', message: 'sandbox booting', fields: { logger: 'node-agent' } },
      { timestamp: at(1), level: 'error', message: 'envd: memory guard killed pid 7', fields: { logger: 'envd', pid: '7' } },
    ]);
    const human = await runGw(['sandbox', 'logs', id]);
    assert.equal(human.code, 0, human.stderr);
    assert.equal(human.stdout, `${at(0)} INFO  [node-agent] sandbox booting\n${at(1)} ERROR [envd] envd: memory guard killed pid 7 pid=7\n`);
    const entries = json(await runGw(['sandbox', 'logs', id, '--json']));
    assert.deepEqual(entries.map((e: { timestamp: string; level: string }) => [e.timestamp, e.level]), [[at(0), 'info'], [at(1), 'error']]);
    assert.deepEqual(json(await runGw(['sandbox', 'logs', id, '--level', 'error', '--json'])).map((e: { message: string }) => e.message), ['envd: memory guard killed pid 7']);
    assert.deepEqual(json(await runGw(['sandbox', 'logs', id, '--newest-first', '--limit', '1', '--json'])).map((e: { message: string }) => e.message), ['envd: memory guard killed pid 7']);
    assert.equal((await runGw(['sandbox', 'logs', id, '--search', 'nothing like it'])).stdout, 'no log entries\n');
    const unknown = await runGw(['sandbox', 'logs', 'sbx-missing']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /\(HTTP 404\)\n$/);
    const zero = await runGw(['sandbox', 'logs', id, '--limit', '0']);
    assert.equal(zero.code, 1);
    assert.match(zero.stderr, /^svc: .*limit.*\(HTTP 400\)\n$/);
    assert.equal((await runGw(['sandbox', 'logs', id, '--level', 'loud'])).code, 2);
  });

  test('pause --no-memory, connect --reboot, create --on-timeout pause --no-pause-memory', async () => {
    const id = await created();
    assert.deepEqual(json(await runGw(['sandbox', 'pause', id, '--no-memory', '--json'])), { sandboxId: id, paused: true, alreadyPaused: false, keepMemory: false });
    assert.equal(json(await runGw(['sandbox', 'info', id, '--json'])).pauseKind, 'filesystem');
    assert.match((await runGw(['sandbox', 'info', id])).stdout, /^state:\s+paused \(filesystem\)$/m);
    assert.equal(json(await runGw(['sandbox', 'connect', id, '--json'])).state, 'running');
    assert.equal(gw.m.node.calls.at(-1), `resume ${id} with identity`, 'booted again from its files');

    assert.match((await runGw(['sandbox', 'pause', id])).stdout, new RegExp(`^paused ${id}\n$`));
    const rebooted = await runGw(['sandbox', 'connect', id, '--reboot']);
    assert.equal(rebooted.code, 0, rebooted.stderr);
    assert.match(rebooted.stdout, /^state:\s+running$/m);
    assert.equal(gw.m.node.calls.at(-1), `resume ${id} with identity`, '--reboot drops the kept memory');

    const s = json(await runGw(['sandbox', 'create', '--on-timeout', 'pause', '--no-pause-memory', '--timeout', '1', '--json']));
    assert.deepEqual(s.lifecycle, { onTimeout: 'pause', autoResume: false });
    await new Promise((r) => setTimeout(r, 1100));
    await gw.m.master.sandboxes.pause(s.sandboxId, 'timeout');
    assert.equal(json(await runGw(['sandbox', 'info', s.sandboxId, '--json'])).pauseKind, 'filesystem', "the timeout's pause frees the memory");

    for (const args of [
      ['sandbox', 'create', '--no-pause-memory'],
      ['sandbox', 'create', '--on-timeout', 'kill', '--no-pause-memory'],
      ['sandbox', 'create', '--on-timeout', 'pause', '--no-pause-memory', '--auto-resume'],
    ]) {
      const r = await runGw(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^svc: --no-pause-memory /, args.join(' '));
    }
  });
});

describe('endpoint resolution', () => {
  test('flags, then environment, then <data dir>/endpoint.json', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-data-'));
    try {
      writeFileSync(join(dataDir, 'endpoint.json'), JSON.stringify({ apiUrl: api.url, apiKey: 'key-1', sandboxUrl: envd.url }));
      assert.equal((await svc(['tpl', 'list', '--data-dir', dataDir])).code, 0, 'from endpoint.json via --data-dir');
      assert.equal((await svc(['tpl', 'list'], { SVC_DATA_DIR: dataDir })).code, 0, 'from endpoint.json via SVC_DATA_DIR');

      const wrongEnv = await svc(['tpl', 'list', '--data-dir', dataDir], { SVC_API_KEY: 'nope' });
      assert.equal(wrongEnv.code, 1, 'the environment wins over the file');
      assert.match(wrongEnv.stderr, /invalid API key \(HTTP 401\)/);
      assert.equal((await svc(['tpl', 'list', '--data-dir', dataDir, '--api-key', 'key-1'], { SVC_API_KEY: 'nope' })).code, 0, 'the flag wins over the environment');

      const unreachable = await svc(['tpl', 'list', '--api-url', 'http://127.0.0.1:1']);
      assert.equal(unreachable.code, 1);
      assert.match(unreachable.stderr, /^svc: .*cannot connect/);

      writeFileSync(join(dataDir, 'endpoint.json'), '{not json');
      const broken = await svc(['tpl', 'list', '--data-dir', dataDir]);
      assert.equal(broken.code, 1);
      assert.match(broken.stderr, /endpoint\.json is not valid JSON/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('the bin script and the TypeScript sources run the CLI', async () => {
    const r = await svc(['--version'], {}, [BIN]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), '0.1.0');
    const fromSource = await svc(['node', 'list', '--json'], { SVC_API_URL: api.url, SVC_API_KEY: 'key-1' }, ['--import', 'tsx', MAIN]);
    assert.equal(JSON.parse(fromSource.stdout)[0].id, 'node-1');
    const usage = await svc(['sandbox', 'info'], {}, ['--import', 'tsx', MAIN]);
    assert.equal(usage.code, 2);
  });
});

describe('svc tpl', () => {
  test('create waits, reporting phases, and prints the template', async () => {
    const r = await run(['tpl', 'create', '--image', 'reg.local/app:1', '--alias', 'app-1', '--registry-user', 'u', '--registry-password', 'p', '--insecure-registry', '--platform', 'linux/arm64', '--no-svc-ca',
      '--start-cmd', 'node server.js', '--ready-cmd', 'curl -sf localhost:3000']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(api.requests.findLast((q) => q.method === 'POST' && q.url === '/svc/template')!.body, {
      image: 'reg.local/app:1', alias: 'app-1', registry_auth: { username: 'u', password: 'p' }, insecure_registry: true,
      platform: 'linux/arm64', with_svc_ca: false, start_cmd: 'node server.js', ready_cmd: 'curl -sf localhost:3000',
    });
    assert.equal((await run(['tpl', 'create', '--image', 'x', '--ready-cmd', 'true'])).code, 2, '--ready-cmd without --start-cmd is a usage error');
    assert.match(r.stderr, /pulling \(.* in 2 layers\)/);
    assert.match(r.stderr, /built/);
    assert.match(r.stdout, /^status:\s+ready$/m);
    assert.match(r.stdout, /^alias:\s+app-1$/m);
  });

  test('create --json, --no-wait, local paths made absolute', async () => {
    const done = json(await run(['tpl', 'create', '--oci-layout', 'some/layout', '--json']));
    assert.equal(done.job.status, 'BUILT');
    assert.equal(done.template.status, 'ready');
    const sent = api.requests.findLast((q) => q.url === '/svc/template' && q.method === 'POST')!.body as { oci_layout: string };
    assert.equal(sent.oci_layout, resolve(import.meta.dirname, '../../..', 'some/layout'));
    const queued = json(await run(['tpl', 'create', '--rootfs-tar', '/tmp/rootfs.tar', '--no-wait', '--json']));
    assert.equal(queued.status, 'PENDING');
    const status = json(await run(['tpl', 'status', queued.jobId, '--json']));
    assert.equal(status.jobId, queued.jobId);
    assert.equal(status.progress.layers.length, 2);
    const human = await run(['tpl', 'status', queued.jobId]);
    assert.match(human.stdout, /^LAYER\s+PULLED\s+SIZE$/m);
  });

  test('a failed build exits 1 with the reason', async () => {
    const r = await run(['tpl', 'create', '--archive', '/tmp/broken.tar']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^svc: template build job-\S+ failed: image has no root filesystem$/m);
  });

  test('create needs exactly one source and paired registry credentials', async () => {
    for (const args of [
      ['tpl', 'create'],
      ['tpl', 'create', '--image', 'a', '--archive', 'b'],
      ['tpl', 'create', '--image', 'a', '--registry-user', 'u'],
      ['tpl', 'create', '--image', 'a', '--platform', 'amd64'],
    ]) {
      const r = await run(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^svc: /);
    }
  });

  test('list, info, alias, redo, merge, delete', async () => {
    const t = json(await run(['tpl', 'create', '--image', 'reg.local/b:1', '--json'])).template;
    const table = await run(['tpl', 'list']);
    assert.match(table.stdout, /^ID\s+ALIAS\s+STATUS\s+SOURCE\s+CREATED$/m);
    assert.match(table.stdout, new RegExp(`^${t.templateId}\\s+-\\s+ready\\s+reg.local/b:1`, 'm'));
    assert.equal(json(await run(['tpl', 'alias', t.templateId, 'bee', '--json'])).alias, 'bee');
    assert.equal(json(await run(['tpl', 'info', 'bee', '--json'])).templateId, t.templateId);
    assert.match((await run(['tpl', 'alias', t.templateId])).stdout, /has no alias/);
    const redo = json(await run(['tpl', 'redo', t.templateId, '--json']));
    assert.equal(redo.job.kind, 'REDO');
    assert.equal(json(await run(['tpl', 'merge', t.templateId, '--json'])).templateId, t.templateId);
    assert.deepEqual(json(await run(['tpl', 'delete', t.templateId, '--json'])), { templateId: t.templateId, deleted: true });
    const missing = await run(['tpl', 'delete', t.templateId]);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, `svc: template ${t.templateId} not found\n`);
    const info = await run(['tpl', 'info', t.templateId]);
    assert.match(info.stderr, new RegExp(`\\(HTTP 404, code ${ErrorCodes.templateNotFound}\\)`));
  });
});

describe('svc node', () => {
  test('list, label, unlabel', async () => {
    const table = await run(['node', 'list']);
    assert.match(table.stdout, /^ID\s+STATUS\s+RUNTIMES\s+ADDRESS\s+RUNNING\s+PAUSED\s+MEMORY MB \(USED\/CAPACITY\)\s+LABELS$/m);
    assert.match(table.stdout, /^node-1\s+ready\s+gvisor/m);
    const labeled = json(await run(['node', 'label', 'node-1', 'disk=ssd', 'svc.dev/tier=gold', '--json']));
    assert.equal(labeled.labels.disk, 'ssd');
    assert.equal(labeled.labels['svc.dev/tier'], 'gold');
    const unlabeled = json(await run(['node', 'unlabel', 'node-1', 'disk', '--json']));
    assert.equal(unlabeled.labels.disk, undefined);
    const missing = await run(['node', 'label', 'node-9', 'a=b']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /node not found \(HTTP 404\)/);
    assert.equal((await run(['node', 'label', 'node-1', 'nokey'])).code, 2);
  });

  test('drain waits for the drain and tells each sandbox on stderr; --no-wait, drain-status, undrain', async () => {
    const drained = await run(['node', 'drain', 'node-1']);
    assert.equal(drained.code, 0, drained.stderr);
    assert.equal(drained.stderr, 'draining node-1: 1 sandbox(es)\n  moved sbx-moved\n');
    assert.equal(drained.stdout, 'node-1: draining; drain done, 1 of 1 gone over; moved 1, stored 0, failed 0\n');
    const started = json(await run(['node', 'drain', 'node-1', '--no-wait', '--json']));
    assert.equal(started.state, 'running');
    assert.equal(json(await run(['node', 'drain-status', 'node-1', '--json'])).state, 'done');
    assert.equal(json(await run(['node', 'undrain', 'node-1', '--json'])).status, 'ready');
    const missing = await run(['node', 'drain', 'node-9']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /node not found \(HTTP 404\)/);
  });
});

describe('svc volume', () => {
  test('create prints id, name and token; list; info by id or name; --json everywhere', async () => {
    const made = json(await run(['volume', 'create', 'cli-vol', '--json']));
    assert.deepEqual(Object.keys(made).sort(), ['name', 'token', 'volumeId']);
    assert.equal(made.name, 'cli-vol');
    assert.deepEqual(api.requests[api.requests.length - 1].body, { name: 'cli-vol' });
    const human = await run(['volume', 'create', '--driver', 'local']);
    assert.equal(human.code, 0, human.stderr);
    assert.deepEqual(api.requests[api.requests.length - 1].body, { driver: 'local' });
    const [, id] = /^id:\s+(\S+)$/m.exec(human.stdout)!;
    assert.match(human.stdout, new RegExp(`^name:\\s+${id}$`, 'm'), 'an unnamed volume is named by its id');
    assert.match(human.stdout, /^token:\s+vtok-/m);

    const listed = json(await run(['volume', 'list', '--json']));
    assert.deepEqual(listed.find((v: { volumeId: string }) => v.volumeId === made.volumeId), { volumeId: made.volumeId, name: 'cli-vol' });
    const table = await run(['volume', 'ls']);
    assert.match(table.stdout, /^ID\s+NAME$/m);
    assert.match(table.stdout, new RegExp(`^${made.volumeId}\\s+cli-vol$`, 'm'));
    assert.deepEqual(json(await run(['volume', 'info', 'cli-vol', '--json'])), made);
    assert.match((await run(['volume', 'info', made.volumeId])).stdout, new RegExp(`^token:\\s+${made.token}$`, 'm'));
  });

  test('refusals exit 1 with one line: a bad name (nothing sent), an unknown driver, a missing volume, a mounted one', async () => {
    const sent = api.requests.length;
    const bad = await run(['volume', 'create', 'bad name']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^svc: the volume name "bad name" must match .*\n$/);
    assert.equal(api.requests.length, sent);
    const driver = await run(['volume', 'create', 'v2', '--driver', 'ceph']);
    assert.equal(driver.code, 1);
    assert.equal(driver.stderr, 'svc: unknown driver "ceph" (HTTP 400, code 130400)\n');
    const missing = await run(['volume', 'info', 'nope']);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, 'svc: volume nope not found (HTTP 404)\n');

    const vol = json(await run(['volume', 'create', 'in-use', '--json']));
    const sbx = json(await run(['sandbox', 'create', '--json']));
    api.sandboxes.get(sbx.sandboxId)!.volumeMounts.push({ name: vol.volumeId, path: '/data' });
    const busy = await run(['volume', 'delete', 'in-use']);
    assert.equal(busy.code, 1);
    assert.equal(busy.stderr, 'svc: volume in-use is mounted by a sandbox (HTTP 409, code 130409)\n');
    json(await run(['sandbox', 'kill', sbx.sandboxId, '--json']));
    assert.deepEqual(json(await run(['volume', 'delete', 'in-use', '--json'])), { volume: 'in-use', deleted: true });
    const gone = await run(['volume', 'rm', vol.volumeId]);
    assert.equal(gone.code, 1);
    assert.equal(gone.stderr, `svc: volume ${vol.volumeId} not found\n`);
    assert.equal((await run(['volume', 'info'])).code, 2, 'a usage error');
  });
});

describe('svc team, svc key (real gateway over the fake node)', () => {
  let gw: GatewayOverFakeNode;
  before(async () => { gw = await startGatewayOverFakeNode({ apiKey: 'e2b_00000000000000000000000000000000000000ad' }); });
  after(() => gw?.close());
  const as = (key: string) => (args: string[]) => svc(args, { SVC_API_URL: gw.url, SVC_API_KEY: key });
  const admin = (args: string[]) => as(gw.apiKey)(args);

  test('team create prints teamId, apiKey, apiKeyId; the key works and sees only its team; limits; key create, list, revoke', async () => {
    const made = json(await admin(['team', 'create', 'cli-team', '--max-sandboxes', '1', '--json']));
    assert.deepEqual(Object.keys(made).sort(), ['apiKey', 'apiKeyId', 'teamId']);
    assert.match(made.apiKey, /^e2b_[0-9a-f]{40}$/);
    const team = as(made.apiKey);
    assert.equal((await team(['sandbox', 'create', '--json'])).code, 0);
    const over = await team(['sandbox', 'create']);
    assert.equal(over.code, 1);
    assert.match(over.stderr, /maxSandboxes/);
    assert.deepEqual(json(await admin(['sandbox', 'list', '--json'])), [], 'the admin key speaks for the default team: it does not see the team\'s sandbox');
    const limits = json(await admin(['team', 'limits', made.teamId, '--max-sandboxes', '0', '--max-memory-mb', '4096', '--json']));
    assert.equal(limits.limits.maxMemoryMB, 4096);
    assert.equal((await admin(['team', 'limits', made.teamId])).code, 1, 'no limit named');
    assert.equal((await admin(['team', 'create', 'bad name'])).code, 1);
    assert.equal((await team(['team', 'create', 'sneaky'])).code, 1, 'a team key makes no teams');
    const table = await admin(['team', 'list']);
    assert.match(table.stdout, /^ID\s+NAME\s+DEFAULT\s+LIMITS$/m);
    assert.match(table.stdout, /cli-team\s+-\s+maxMemoryMB=4096/);

    const key = json(await admin(['key', 'create', '--team', made.teamId, '--name', 'ci', '--json']));
    assert.equal(key.teamId, made.teamId);
    const listed = json(await team(['key', 'list', '--json']));
    assert.deepEqual(listed.map((k: { keyId: string }) => k.keyId).sort(), [made.apiKeyId, key.apiKeyId].sort());
    assert.ok(!JSON.stringify(listed).includes(key.apiKey), 'listing never shows a key');
    assert.equal((await team(['key', 'revoke', key.apiKeyId])).code, 0);
    assert.equal((await team(['key', 'revoke', key.apiKeyId])).code, 1, 'a revoked key is gone');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal((await as(key.apiKey)(['sandbox', 'list'])).code, 1, 'the revoked key opens nothing');
  });
});
