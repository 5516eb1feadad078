import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { configArgument } from './component-main.ts';

const ROOT = resolve(import.meta.dirname, '../../..');

test('--config is taken out of the arguments, the rest are the component\'s', () => {
  assert.deepEqual(configArgument(['--config', 'a.yaml', '--replica', '1']), { file: 'a.yaml', args: ['--replica', '1'] });
  assert.deepEqual(configArgument(['--config=b.yaml']), { file: 'b.yaml', args: [] });
  assert.deepEqual(configArgument([]), { file: undefined, args: [] });
  assert.throws(() => configArgument(['--config']), /--config needs a file/);
});

interface Run { exit: Promise<number | null>; lines: string[]; kill(signal: NodeJS.Signals): void; waitFor(re: RegExp): Promise<string> }

function run(script: string, args: string[]): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SVC_CONFIG: '' } });
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  const onData = (d: Buffer) => {
    lines.push(...d.toString().split('\n').filter(Boolean));
    for (const w of waiters.splice(0)) w();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exit = new Promise<number | null>((r) => child.on('exit', (code) => { for (const w of waiters.splice(0)) w(); r(code); }));
  const waitFor = async (re: RegExp) => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const hit = lines.find((l) => re.test(l));
      if (hit) return hit;
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no line matching ${re}; output:\n${lines.join('\n')}`);
      await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 500); });
    }
  };
  return { exit, lines, kill: (s) => child.kill(s), waitFor };
}

test('the master (`svc master`) and the API gateway (its main.ts) run alone from one config file, answer their health routes and stop on SIGTERM', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-main-'));
  try {
    const config = join(dir, 'svc.yaml');
    writeFileSync(config, [
      'master:', '  listen: 127.0.0.1:0', `  database: { driver: sqlite, path: ${join(dir, 'master.db')} }`,
      'api:', '  listen: 127.0.0.1:0',
    ].join('\n'));
    const master = run('packages/cli/src/main.ts', ['master', '--config', config]);
    const masterUrl = JSON.parse(await master.waitFor(/master listening/)).url as string;
    const health = await (await fetch(`${masterUrl}/notify/health`)).json() as { ok: boolean; tasks: object };
    assert.equal(health.ok, true);
    assert.ok('stuck sandbox reconcile' in health.tasks);

    writeFileSync(config, `master:\n  addr: ${masterUrl}\napi:\n  listen: 127.0.0.1:0\n`);
    const api = run('packages/api/src/main.ts', ['--config', config]);
    const apiUrl = JSON.parse(await api.waitFor(/API gateway listening/)).url as string;
    assert.deepEqual(await (await fetch(`${apiUrl}/health`)).json(), { ok: true });
    assert.equal((await fetch(`${apiUrl}/v2/sandboxes`)).status, 200, 'the gateway reaches the master of the config');

    api.kill('SIGTERM');
    master.kill('SIGTERM');
    assert.equal(await api.exit, 0);
    assert.equal(await master.exit, 0);
    assert.ok(master.lines.some((l) => /master stopping/.test(l)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a component that cannot start says why in one fatal line: exit code 2 for its configuration, 1 for the rest', async () => {
  for (const [script, args] of [['packages/master/src/main.ts', []], ['packages/cli/src/main.ts', ['lifecycle']]] as const) {
    const bad = run(script, [...args, '--config', '/nonexistent/svc.yaml']);
    assert.equal(await bad.exit, 2);
    assert.ok(bad.lines.some((l) => /failed to start/.test(l) && /does not exist/.test(l)), bad.lines.join('\n'));
  }
  const dir = mkdtempSync(join(tmpdir(), 'svc-main-'));
  const taken = createServer();
  try {
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    writeFileSync(join(dir, 'svc.yaml'), `master:\n  listen: 127.0.0.1:${port}\n  database: { driver: sqlite, path: ${join(dir, 'm.db')} }\n`);
    const busy = run('packages/master/src/main.ts', ['--config', join(dir, 'svc.yaml')]);
    assert.equal(await busy.exit, 1);
    assert.ok(busy.lines.some((l) => /failed to start/.test(l) && /EADDRINUSE/.test(l)), busy.lines.join('\n'));
  } finally {
    taken.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a configuration mistake is one line naming the key on stderr and exit code 2, not a stack', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-main-'));
  try {
    const cases: Array<[string, string[], string, RegExp]> = [
      ['typo.yaml', ['master'], 'api:\n  listn: 127.0.0.1:0\n', /^svc master: configuration error: api\.listn: /],
      // Beyond loopback an empty secret would serve everyone as the platform: refused, not warned of.
      ['open-api.yaml', ['api'], 'api:\n  listen: 0.0.0.0:0\n  api_key: ""\n', /^svc api: configuration error: api\.api_key: is empty and api\.auth_callback_url too, and api\.listen 0\.0\.0\.0:0 is not a loopback address/],
      ['open-master.yaml', ['master'], `master:\n  listen: 0.0.0.0:0\n  database: { driver: sqlite, path: ${join(dir, 'm.db')} }\n`, /^svc master: configuration error: cluster_token: is not set, and 0\.0\.0\.0:0 is not a loopback address/],
    ];
    for (const [file, args, yaml, line] of cases) {
      writeFileSync(join(dir, file), yaml);
      const bad = run('packages/cli/src/main.ts', [...args, '--config', join(dir, file)]);
      assert.equal(await bad.exit, 2, bad.lines.join('\n'));
      assert.ok(bad.lines.some((l) => line.test(l)), `${file}:\n${bad.lines.join('\n')}`);
      assert.ok(!bad.lines.some((l) => /\n\s+at |"stack"/.test(l)), `no stack for ${file}:\n${bad.lines.join('\n')}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
