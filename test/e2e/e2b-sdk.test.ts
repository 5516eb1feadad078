/**
 * The official e2b SDK, pointed at `svc up` with E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY,
 * drives real gVisor sandboxes: commands, files, PTY, watch, pause and resume. SVC_E2B_SDK names
 * another release installed beside it under an npm alias (e2b-2.46: the one E2B's self-hosted
 * Embed pinned), which scripts/test.sh runs this file with too (docs/compatibility.md).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as E2b from 'e2b';
import { NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';
import { loadOrCreateSecrets } from '../../packages/cli/src/secrets.ts';
import { RUNTIME, sandboxProcesses, sandboxProcessesAll, startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';

const SDK = process.env.SVC_E2B_SDK || 'e2b';
const { Sandbox, CommandExitError, NotFoundError, Template, waitForFile } = (await import(SDK)) as typeof E2b;
type Sandbox = E2b.Sandbox;
/** The HTTP status an SDK error carries: 2.51 as statusCode, 2.46 only at the start of its message ("400: ..."). */
const hasStatus = (e: Error & { statusCode?: number }, status: number) => e.statusCode === status || e.message.startsWith(`${status}: `);
console.log(`# the official SDK under test: ${SDK}`);

let p: RunningPlatform;
diagnoseFailures(() => p);
before(async () => {
  p = await startPlatform();
  useE2bEnv(p);
});
after(async () => {
  if (!p) return; // it never started: the before hook reported why
  await p.stop();
  assert.deepEqual(sandboxProcessesAll().filter((l) => l.includes(p.dataDir)), [], 'svc up left sandbox processes behind');
  // A clean stop leaves nothing of the data directory mounted (templates' artifacts, sandboxes' disks),
  // so that it can be moved or removed; the next start mounts again.
  const mounted = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4]).filter((m) => m?.startsWith(`${p.dataDir}/`));
  assert.deepEqual(mounted, [], 'svc up left mounts in its data directory');
});

test('commands: foreground, env, cwd, users, exit codes, background with stdin, kill', async () => {
  const sbx = await Sandbox.create('base', { envs: { GREETING: 'hi' }, timeoutMs: 300_000 });
  try {
    const r = await sbx.commands.run('echo "$GREETING from $(whoami) in $PWD"');
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout.trim(), 'hi from user in /home/user');
    const root = await sbx.commands.run('id -u', { user: 'root' });
    assert.equal(root.stdout.trim(), '0');
    const cwd = await sbx.commands.run('pwd', { cwd: '/tmp' });
    assert.equal(cwd.stdout.trim(), '/tmp');
    await assert.rejects(sbx.commands.run('echo oops >&2; exit 3'), (e: unknown) => {
      assert.ok(e instanceof CommandExitError);
      assert.equal(e.exitCode, 3);
      assert.equal(e.stderr.trim(), 'oops');
      return true;
    });
    await assert.rejects(sbx.commands.run('/no/such/binary'), (e: unknown) => e instanceof CommandExitError && e.exitCode === 127);
    // The tools E2B users expect of `base`.
    const have = await sbx.commands.run('git --version && python --version && pip --version && node --version && npm --version && gcc --version | head -1 && python -m venv --without-pip /tmp/venv && /tmp/venv/bin/python -c "print(1)"');
    for (const tool of [/git version/, /Python 3/, /^pip /m, /^v\d+\./m, /^\d+\.\d+\.\d+$/m, /gcc/]) assert.match(have.stdout, tool);
    // updateNetwork through the official SDK reaches the sandbox's firewall (enforcement: node-agent network.test.ts).
    await sbx.updateNetwork({ denyOut: ['10.9.0.0/16'] });
    assert.equal((await sbx.commands.run('echo still answering')).stdout.trim(), 'still answering');
    // coreutils 9 stats with AT_NO_AUTOMOUNT, which this runsc refuses; the preloaded shim drops it.
    const tools = await sbx.commands.run('ls -l /etc/os-release && stat -c %F /etc && cp -a /etc/hosts /tmp/h && find /tmp -name h && du -s /tmp/h');
    assert.match(tools.stdout, /os-release/);
    assert.match(tools.stdout, /^directory$/m);
    assert.match(tools.stdout, /^\/tmp\/h$/m);
    // sudo works for `user` although gVisor forbids set-uid programs: it goes through envd
    // (docs/decisions.md): stdin and stdout are the caller's, the exit status comes back.
    const sudo = await sbx.commands.run('sudo id -u && sudo -u user id -un && echo through | sudo tee /root/proof >/dev/null && sudo cat /root/proof && sudo sh -c "exit 4"; echo "rc=$?"');
    assert.equal(sudo.stdout, '0\nuser\nthrough\nrc=4\n');
    await sbx.commands.run('useradd -M guest', { user: 'root' });
    await assert.rejects(sbx.commands.run('sudo id', { user: 'guest' }), (e: unknown) =>
      e instanceof CommandExitError && e.exitCode === 1 && /guest is not in the sudoers file/.test(e.stderr));

    const out: string[] = [];
    const cat = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => { out.push(d); } });
    await sbx.commands.sendStdin(cat.pid, 'line one\n');
    await sbx.commands.sendStdin(cat.pid, 'line two\n');
    for (let i = 0; i < 50 && out.join('').split('\n').length < 3; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(out.join(''), 'line one\nline two\n');
    const listed = await sbx.commands.list();
    assert.ok(listed.some((x) => x.pid === cat.pid));
    assert.equal(await sbx.commands.kill(cat.pid), true);
    await assert.rejects(cat.wait());

    const sleeper = await sbx.commands.run('sleep 600', { background: true });
    await sleeper.kill();
    assert.equal((await sbx.commands.list()).some((x) => x.pid === sleeper.pid), false);
  } finally {
    await sbx.kill();
  }
});

test('files: write, read, list, rename, remove, exists, makeDir, watch', async () => {
  const sbx = await Sandbox.create('base');
  try {
    await sbx.files.write('/home/user/hello.txt', 'hello world');
    assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hello world');
    const bytes = new Uint8Array(256 * 1024).map((_, i) => i % 251);
    await sbx.files.write('/tmp/blob.bin', bytes.buffer);
    const back = await sbx.files.read('/tmp/blob.bin', { format: 'bytes' });
    assert.deepEqual(Buffer.from(back), Buffer.from(bytes));
    await sbx.files.makeDir('/home/user/dir/sub');
    await sbx.files.write('/home/user/dir/sub/a.txt', 'a');
    const entries = await sbx.files.list('/home/user/dir', { depth: 2 });
    assert.deepEqual(entries.map((e) => e.path).sort(), ['/home/user/dir/sub', '/home/user/dir/sub/a.txt']);
    await sbx.files.rename('/home/user/hello.txt', '/home/user/renamed.txt');
    assert.equal(await sbx.files.exists('/home/user/hello.txt'), false);
    assert.equal(await sbx.files.exists('/home/user/renamed.txt'), true);
    await sbx.files.remove('/home/user/renamed.txt');
    assert.equal(await sbx.files.exists('/home/user/renamed.txt'), false);
    await assert.rejects(sbx.files.read('/nope/missing.txt'), (e: unknown) => e instanceof NotFoundError);

    const events: string[] = [];
    const watcher = await sbx.files.watchDir('/home/user/dir', (ev) => { events.push(`${ev.type}:${ev.name}`); }, { recursive: true });
    await sbx.files.write('/home/user/dir/new.txt', 'x');
    await sbx.commands.run('echo more >> /home/user/dir/new.txt');
    for (let i = 0; i < 50 && !events.some((e) => e.includes('new.txt')); i++) await new Promise((r) => setTimeout(r, 100));
    await watcher.stop();
    assert.ok(events.some((e) => e.includes('new.txt')), `watch events: ${events.join(', ')}`);
  } finally {
    await sbx.kill();
  }
});

test('pty: create, input, resize, kill', async () => {
  const sbx = await Sandbox.create('base');
  try {
    let screen = '';
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { screen += Buffer.from(d).toString(); } });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo pty-$((6*7))\n'));
    for (let i = 0; i < 50 && !screen.includes('pty-42'); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(screen.includes('pty-42'), screen);
    await sbx.pty.resize(term.pid, { cols: 120, rows: 40 });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'));
    for (let i = 0; i < 50 && !screen.includes('40 120'); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(screen.includes('40 120'), screen);
    assert.equal(await sbx.pty.kill(term.pid), true);
  } finally {
    await sbx.kill();
  }
});

test('pause and resume: no samples while paused, the kind of pause, files, a background process and a server survive', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 600_000 });
  try {
    await sbx.files.write('/home/user/state.txt', 'before pause');
    // Written aside and renamed: a read between a truncate and its write would see an empty file.
    await sbx.commands.run(`nohup sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done' >/dev/null 2>&1 &`);
    await sbx.commands.run('nohup python3 -m http.server 8000 --directory /home/user >/dev/null 2>&1 &');
    // fetch cannot set Host, so name the sandbox the way the SDK's E2B_SANDBOX_URL mode does
    const viaProxy = async () => {
      const res = await fetch(`${p.sandboxUrl}/state.txt`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' } });
      return { status: res.status, text: await res.text() };
    };
    for (let i = 0; i < 50; i++) {
      const r = await viaProxy().catch(() => { /* the server is not up yet: poll again */ return undefined; });
      if (r?.status === 200) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.deepEqual(await viaProxy(), { status: 200, text: 'before pause' });

    assert.equal(await sbx.pause(), true);
    const info = await sbx.getInfo();
    assert.equal(info.state, 'paused');
    const raw = await fetch(`${p.apiUrl}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-Key': p.apiKey } }).then((r) => r.json() as Promise<{ pauseKind?: string }>);
    // gVisor freezes (memory kept); a microVM is written to disk and QEMU ends.
    assert.equal(raw.pauseKind, RUNTIME === 'microvm' ? 'snapshot' : 'freeze');
    // Frozen, it is not sampled at all (docs/observability.md, "Metrics history"): the series ends
    // at the pause, however long it sleeps.
    const pausedAt = Math.floor(Date.now() / 1000);
    await new Promise((r) => setTimeout(r, 6000));
    const later = await Sandbox.getMetrics(sbx.sandboxId);
    assert.deepEqual(later.filter((m) => m.timestamp.getTime() / 1000 > pausedAt), [], `samples while paused: ${JSON.stringify(later)}`);

    const resumed = await Sandbox.connect(sbx.sandboxId);
    const c1 = Number((await resumed.commands.run('cat /tmp/counter')).stdout);
    await new Promise((r) => setTimeout(r, 500));
    const c2 = Number((await resumed.commands.run('cat /tmp/counter')).stdout);
    assert.ok(c2 > c1, `the background process keeps counting after resume (${c1} → ${c2})`);
    assert.equal(await resumed.files.read('/home/user/state.txt'), 'before pause');
    assert.deepEqual(await viaProxy(), { status: 200, text: 'before pause' });
  } finally {
    await sbx.kill();
  }
});

test('filesystem pause: processes gone, files kept, connect boots it again; the idle timeout does the same; auto-resume refused', async () => {
  const kind = async (id: string) => (await fetch(`${p.apiUrl}/sandboxes/${id}`, { headers: { 'X-API-Key': p.apiKey } }).then((r) => r.json() as Promise<{ state: string; pauseKind?: string }>));
  const sbx = await Sandbox.create('base', { envs: { KEPT_ENV: 'env-back' }, timeoutMs: 600_000 });
  try {
    await sbx.files.write('/home/user/kept.txt', 'kept');
    // /tmp is on the sandbox's disk, as in E2B, not in its memory: it survives this pause too.
    await sbx.files.write('/tmp/kept-too.txt', 'kept in /tmp');
    await sbx.commands.run('nohup sleep 1000 >/dev/null 2>&1 &');
    const runsc = () => sandboxProcesses(p.dataDir, sbx.sandboxId);
    assert.ok(runsc().length > 0, 'its runtime processes are found while it runs');
    assert.equal(await sbx.pause({ keepMemory: false }), true);
    assert.deepEqual(await kind(sbx.sandboxId), { ...(await kind(sbx.sandboxId)), state: 'paused', pauseKind: 'filesystem' });
    assert.deepEqual(runsc(), [], 'its runtime processes (sentry and gofer, or QEMU) are gone');
    // Traffic does not wake it: E2B's proxy answers a sandbox that is not running with 502 on the envd port.
    const poke = await fetch(`${p.sandboxUrl}/health`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } });
    assert.equal(poke.status, 502);
    assert.equal((await kind(sbx.sandboxId)).state, 'paused');

    const back = await Sandbox.connect(sbx.sandboxId);
    assert.equal(await back.files.read('/home/user/kept.txt'), 'kept');
    assert.equal(await back.files.read('/tmp/kept-too.txt'), 'kept in /tmp');
    assert.equal((await back.commands.run('stat -c %a /tmp')).stdout.trim(), '1777');
    assert.equal((await back.commands.run('echo $KEPT_ENV')).stdout.trim(), 'env-back', 'its environment is given back');
    assert.equal((await back.commands.run('pgrep -x sleep || echo none')).stdout.trim(), 'none', 'processes do not survive it');

    // A frozen sandbox connected with onResume 'reboot' drops its memory and boots from its files.
    await back.pause();
    const rebooted = await Sandbox.connect(sbx.sandboxId, { onResume: 'reboot' } as never);
    assert.equal(await rebooted.files.read('/home/user/kept.txt'), 'kept');
  } finally {
    await sbx.kill();
  }

  const idle = await Sandbox.create('base', { timeoutMs: 3_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } } as never);
  try {
    await idle.files.write('/home/user/idle.txt', 'idle');
    // The API shows a pause under way as paused already; its kind comes once it is done.
    for (let i = 0; i < 80 && (await kind(idle.sandboxId)).pauseKind === undefined; i++) await new Promise((r) => setTimeout(r, 250));
    assert.equal((await kind(idle.sandboxId)).pauseKind, 'filesystem', 'the idle timeout paused it without its memory');
    assert.equal(await (await Sandbox.connect(idle.sandboxId)).files.read('/home/user/idle.txt'), 'idle');
  } finally {
    await idle.kill();
  }

  const refused = await fetch(`${p.apiUrl}/sandboxes`, {
    method: 'POST', headers: { 'X-API-Key': p.apiKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }),
  });
  assert.equal(refused.status, 400);
  assert.match(((await refused.json()) as { message: string }).message, /autoResume cannot be combined with autoPauseMemory false/);
});

test('list, getInfo, setTimeout, logs and kill of a paused sandbox', async () => {
  const sbx = await Sandbox.create('base', { metadata: { suite: 'e2e-list' } });
  const listed = await Sandbox.list({ query: { metadata: { suite: 'e2e-list' } } }).nextItems();
  assert.deepEqual(listed.map((s) => s.sandboxId), [sbx.sandboxId]);
  await sbx.setTimeout(120_000);
  const info = await sbx.getInfo();
  assert.ok(info.endAt.getTime() > Date.now() + 100_000);
  await sbx.pause();
  // Its log is envd's lines as its node keeps them, there while it is paused too.
  const logs = async () => fetch(`${p.apiUrl}/v2/sandboxes/${sbx.sandboxId}/logs`, { headers: { 'X-API-Key': p.apiKey } });
  const answer = await logs();
  assert.equal(answer.status, 200);
  const { logs: entries } = await answer.json() as { logs: Array<{ timestamp: string; level: string; message: string; fields: Record<string, string> }> };
  assert.ok(entries.some((e) => e.fields.logger === 'envd' && /listening/.test(e.message) && Date.parse(e.timestamp) <= Date.now()), JSON.stringify(entries));
  assert.equal(await Sandbox.kill(sbx.sandboxId), true);
  assert.equal(await Sandbox.kill(sbx.sandboxId), false);
  assert.equal((await logs()).status, 404);
});

test('snapshots and fork: files before the capture carry over, later writes and siblings\' writes do not; list, delete, bad input', async () => {
  const origin = await Sandbox.create('base', { envs: { FROM_ORIGIN: 'yes' }, metadata: { suite: 'e2e-snap' } });
  const made: Sandbox[] = [origin];
  try {
    await origin.files.write('/home/user/before.txt', 'before');
    await origin.commands.run('sudo rm /etc/motd && mkdir -p /home/user/deep/er && echo x > /home/user/deep/er/f');
    const snap = await origin.createSnapshot({ name: 'e2e-snap' });
    assert.deepEqual(snap, { snapshotId: 'e2e-snap', names: ['e2e-snap'] });
    await origin.files.write('/home/user/after.txt', 'after');

    const [a, b] = [await Sandbox.create(snap.snapshotId), await Sandbox.create(snap.snapshotId)];
    made.push(a, b);
    assert.equal(await a.files.read('/home/user/before.txt'), 'before');
    assert.equal(await a.files.read('/home/user/deep/er/f'), 'x\n');
    assert.equal(await a.files.exists('/etc/motd'), false, 'a deletion before the capture carries over');
    assert.equal(await a.files.exists('/home/user/after.txt'), false, 'a write after it does not');
    assert.equal((await a.commands.run('echo $FROM_ORIGIN')).stdout.trim(), 'yes', 'the origin\'s environment carries over');
    await a.files.write('/home/user/a.txt', 'a');
    assert.equal(await b.files.exists('/home/user/a.txt'), false);

    // The snapshot is in the artifact store, not only on the node that took it: a node without
    // the layer (here: this node, its copy removed) downloads it through the master.
    const nodeAgent = `http://${p.env.SVC_NODE_AGENT_LISTEN}`;
    const headers = { [NODE_TOKEN_HEADER]: loadOrCreateSecrets(p.dataDir).node_agent_token };
    assert.equal((await fetch(`${nodeAgent}/v1/layers`)).status, 401, 'the node agent answers no one without its token');
    const layersHere = async () => (await (await fetch(`${nodeAgent}/v1/layers`, { headers })).json()) as Array<{ layerId: string; sandboxId?: string }>;
    const [snapId] = (await layersHere()).filter((l) => l.sandboxId === origin.sandboxId && l.layerId.startsWith('snap-')).map((l) => l.layerId);
    assert.equal((await fetch(`${nodeAgent}/v1/layers/${snapId}`, { method: 'DELETE', headers })).status, 204);
    const fromStore = await Sandbox.create(snap.snapshotId);
    made.push(fromStore);
    assert.equal(await fromStore.files.read('/home/user/before.txt'), 'before');
    assert.ok((await layersHere()).some((l) => l.layerId === snapId), 'downloaded and kept');

    const listed = await Sandbox.listSnapshots({ sandboxId: origin.sandboxId }).nextItems();
    assert.deepEqual(listed, [{ snapshotId: 'e2e-snap', names: ['e2e-snap'] }]);

    const results = await Sandbox.fork(origin.sandboxId, { count: 2 });
    const forks = results.filter((r): r is Sandbox => r instanceof Sandbox);
    assert.equal(forks.length, 2, `both forks started: ${results.map(String).join('; ')}`);
    made.push(...forks);
    await forks[0].files.write('/home/user/fork0.txt', 'mine');
    assert.equal(await forks[0].files.read('/home/user/after.txt'), 'after', 'a fork holds what the origin had when it was forked');
    assert.equal(await forks[1].files.exists('/home/user/fork0.txt'), false);
    assert.equal(await origin.files.exists('/home/user/fork0.txt'), false);
    assert.equal((await origin.getInfo()).state, 'running', 'the origin runs on');

    // Bad input: a name with bad characters, a paused sandbox, a template snapshots start from.
    await assert.rejects(origin.createSnapshot({ name: 'no spaces/here' }), (e: Error & { statusCode?: number }) => hasStatus(e, 400));
    const api = { 'X-API-Key': p.apiKey, 'Content-Type': 'application/json' };
    const tpl = await fetch(`${p.apiUrl}/templates/base`, { method: 'DELETE', headers: api });
    assert.equal(tpl.status, 409);
    assert.match(((await tpl.json()) as { message: string }).message, /snapshots or built templates that start from it: (template [^,]+, )*snap-/);
    await b.pause();
    await assert.rejects(b.createSnapshot(), (e: Error & { statusCode?: number }) => hasStatus(e, 409));

    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false);
    await assert.rejects(Sandbox.create(snap.snapshotId), (e: Error & { statusCode?: number }) => hasStatus(e, 404));
    assert.equal(await a.files.read('/home/user/before.txt'), 'before', 'sandboxes made from a snapshot outlive it');
  } finally {
    for (const s of made) await s.kill().catch(() => { /* best effort: the sandbox may already be gone */ return false; });
  }
});

/**
 * Templates a failed earlier run in this data dir left (the data dir is kept between runs for
 * its cached base): the base refuses deletion while they stand on it, and the refusal lists them.
 * Those built on others (longer names) go first.
 */
async function removeTemplatesOfEarlierRuns(prefix: string): Promise<void> {
  const headers = { 'X-API-Key': p.apiKey };
  const listed = await fetch(`${p.apiUrl}/templates`, { headers }).then((r) => r.json() as Promise<Array<{ templateID: string; aliases?: string[] }>>);
  const stale = listed.filter((t) => (t.aliases ?? []).some((a) => a.startsWith(prefix)));
  for (const t of stale.sort((a, b) => (b.aliases?.[0]?.length ?? 0) - (a.aliases?.[0]?.length ?? 0))) {
    await fetch(`${p.apiUrl}/templates/${t.templateID}`, { method: 'DELETE', headers });
  }
}

test('template builder: Template.build runs its steps in a sandbox of the base; sandboxes start with the files and env; an unchanged rebuild is cached; a failing step fails the build', async () => {
  await removeTemplatesOfEarlierRuns('e2e-built-');
  const name = `e2e-built-${Date.now().toString(36)}`;
  const withLastStep = (last: string) => Template().fromTemplate('base')
    .setEnvs({ BUILT_BY: 'svc' })
    .runCmd(`echo "$BUILT_BY" > /opt/built.txt # ${name}: a first build, whatever this data dir built before`, { user: 'root' })
    .runCmd('id -un > ~/default-user.txt && echo written-in-the-build > /tmp/from-build.txt')
    .setWorkdir('/srv/app')
    .runCmd('pwd > where.txt')
    .runCmd(last, { user: 'root' });
  const t = withLastStep('id -un > /root/who.txt');
  const logs: string[] = [];
  const first = Date.now();
  const info = await Template.build(t, name, { onBuildLogs: (e) => logs.push(e.message) });
  const firstMs = Date.now() - first;
  assert.equal(info.name, name);
  assert.ok(logs.some((l) => l.includes('[2/6] RUN echo')), logs.join('\n'));
  assert.equal(await Template.exists(name), true);

  const sbx = await Sandbox.create(name);
  try {
    assert.equal(await sbx.files.read('/opt/built.txt'), 'svc\n');
    assert.equal(await sbx.files.read('/tmp/from-build.txt'), 'written-in-the-build\n', 'what a step writes into /tmp is in the template, as on E2B');
    assert.equal(await sbx.files.read('/home/user/default-user.txt'), 'user\n', 'steps run as E2B\'s default user, in its home');
    assert.equal(await sbx.files.read('/srv/app/where.txt'), '/srv/app\n', 'WORKDIR is where the next steps run, made for the user');
    assert.equal((await sbx.commands.run('cat /root/who.txt', { user: 'root' })).stdout, 'root\n', 'a step runs as the user it names');
    assert.equal((await sbx.commands.run('pwd; id -un')).stdout, '/srv/app\nuser\n', 'sandboxes start commands in the last WORKDIR as the last USER');
    assert.equal((await sbx.commands.run('echo $BUILT_BY')).stdout.trim(), 'svc', 'ENV is the sandboxes\' environment too');
  } finally {
    await sbx.kill();
  }

  // Tags: a build asked for with name:tag, assigned more, started by name:tag, listed.
  const tagged = await Template.build(t, `${name}:v1`);
  assert.deepEqual((await Template.assignTags(`${name}:v1`, ['prod'])).tags, ['prod']);
  const fromTag = await Sandbox.create(`${name}:prod`);
  assert.equal(await fromTag.files.read('/opt/built.txt'), 'svc\n');
  await fromTag.kill();
  assert.deepEqual((await Template.getTags(tagged.templateId)).map((x) => x.tag).sort(), ['default', 'prod', 'v1']);
  await Template.removeTags(name, 'prod');
  await assert.rejects(Sandbox.create(`${name}:prod`), (e: Error & { statusCode?: number }) => hasStatus(e, 404));

  const again: string[] = [];
  const second = Date.now();
  await Template.build(t, name, { onBuildLogs: (e) => again.push(e.message) });
  assert.ok(again.some((l) => l.includes('cached')), again.join('\n'));
  assert.ok(Date.now() - second < firstMs, `the cached rebuild (${Date.now() - second} ms) is quicker than the first (${firstMs} ms)`);

  // A changed last step: the steps before it come from the cache; only it runs, on their files.
  const changed = withLastStep('cat /opt/built.txt > /root/who.txt');
  const partial: string[] = [];
  await Template.build(changed, `${name}-changed`, { onBuildLogs: (e) => partial.push(e.message) });
  assert.deepEqual(partial.filter((l) => /^\[\d\/6\]/.test(l)), [
    '[1/6] CACHED ENV BUILT_BY svc', `[2/6] CACHED RUN echo "$BUILT_BY" > /opt/built.txt # ${name}: a first build, whatever this data dir built before root`,
    '[3/6] CACHED RUN id -un > ~/default-user.txt && echo written-in-the-build > /tmp/from-build.txt', '[4/6] CACHED WORKDIR /srv/app', '[5/6] CACHED RUN pwd > where.txt',
    '[6/6] RUN cat /opt/built.txt > /root/who.txt root',
  ], partial.join('\n'));
  const fromChanged = await Sandbox.create(`${name}-changed`);
  try {
    assert.equal((await fromChanged.commands.run('cat /root/who.txt /srv/app/where.txt', { user: 'root' })).stdout, 'svc\n/srv/app\n', 'the last step ran on the cached steps\' files');
  } finally {
    await fromChanged.kill();
  }

  // A start command: it runs when a sandbox of the template starts, which answers once the ready check passes.
  const served = Template().fromTemplate(name)
    .setStartCmd('while true; do date > /tmp/alive; sleep 1; done', waitForFile('/tmp/alive'));
  const serveLogs: string[] = [];
  await Template.build(served, `${name}-start`, { onBuildLogs: (e) => serveLogs.push(e.message) });
  assert.ok(serveLogs.includes('Ready'), serveLogs.join('\n'));
  const up = await Sandbox.create(`${name}-start`);
  try {
    assert.equal(await up.files.exists('/tmp/alive'), true, 'create answers once the ready check passes');
    assert.match((await up.commands.run('ps -eo args')).stdout, /while true/, 'the start command runs on');
  } finally {
    await up.kill();
  }
  await fetch(`${p.apiUrl}/templates/${name}-start`, { method: 'DELETE', headers: { 'X-API-Key': p.apiKey } });

  const failing = Template().fromTemplate(name).runCmd('echo about to fail; exit 7');
  await assert.rejects(Template.build(failing, `${name}-bad`), (e: Error) => /exited with code 7: about to fail/.test(e.message));
  await assert.rejects(Sandbox.create(`${name}-bad`), (e: Error & { statusCode?: number }) => hasStatus(e, 400), 'a failed build leaves no template a sandbox can start');
  const unchanged = await Sandbox.create(name);
  await unchanged.kill();

  // The base cannot go while a built template stands on it; the built template can, with its files.
  const api = { 'X-API-Key': p.apiKey };
  const refused = await fetch(`${p.apiUrl}/templates/base`, { method: 'DELETE', headers: api });
  assert.equal(refused.status, 409);
  assert.match(((await refused.json()) as { message: string }).message, new RegExp(`template ${name}`));
  for (const n of [name, `${name}-bad`]) assert.equal((await fetch(`${p.apiUrl}/templates/${n}`, { method: 'DELETE', headers: api })).status, 204, n);
  assert.equal(await Template.exists(name), false);
  assert.equal((await fetch(`${p.apiUrl}/templates/base`, { method: 'GET', headers: api })).status, 200);
});

test('template builder: copy uploads the context files through a signed URL and places them with Docker COPY semantics, owner and mode; changed files rebuild', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-context-'));
  const name = `e2e-copy-${Date.now().toString(36)}`;
  try {
    mkdirSync(join(dir, 'app/lib'), { recursive: true });
    writeFileSync(join(dir, 'app/index.js'), 'console.log("hi")\n');
    // Files of this run only: the data dir may hold the archives of an earlier run, which would not be uploaded again.
    writeFileSync(join(dir, 'app/run.txt'), name);
    writeFileSync(join(dir, 'app/lib/util.js'), 'exports.x = 1\n');
    writeFileSync(join(dir, 'conf.json'), '{"secret":true}\n');
    symlinkSync('index.js', join(dir, 'app/entry.js'));
    const t = () => Template({ fileContextPath: dir }).fromTemplate('base')
      .copy('app', '/srv/app/')
      .copy('app/*.js', '/opt/js/')
      .copy('conf.json', '/etc/svc-conf.json', { user: 'user', mode: 0o600 })
      .setWorkdir('/home/user')
      .copy('conf.json', 'relative/')
      .runCmd('cat /srv/app/lib/util.js > /opt/copied-before-run.txt', { user: 'root' });
    const logs: string[] = [];
    await Template.build(t(), name, { onBuildLogs: (e) => logs.push(e.message) });
    assert.ok(logs.some((l) => /Uploaded 'app'/.test(l)), logs.join('\n'));
    const sbx = await Sandbox.create(name);
    try {
      assert.equal(await sbx.files.read('/srv/app/index.js'), 'console.log("hi")\n', 'a directory\'s contents land in the destination');
      assert.equal(await sbx.files.read('/srv/app/lib/util.js'), 'exports.x = 1\n');
      assert.equal((await sbx.commands.run('readlink /srv/app/entry.js')).stdout.trim(), 'index.js', 'a symlink stays a symlink');
      assert.equal((await sbx.commands.run('ls /opt/js | sort | tr "\\n" " "')).stdout.trim(), 'entry.js index.js', 'a glob copies what it matched, not the rest');
      assert.equal((await sbx.commands.run('stat -c "%U %a" /etc/svc-conf.json', { user: 'root' })).stdout.trim(), 'user 600', 'owner and mode as asked');
      assert.equal((await sbx.commands.run('stat -c %U /srv/app/index.js')).stdout.trim(), 'user', 'the owner is the step\'s user by default');
      assert.equal(await sbx.files.read('/home/user/relative/conf.json'), '{"secret":true}\n', 'a relative destination is under WORKDIR');
      assert.equal(await sbx.files.read('/opt/copied-before-run.txt'), 'exports.x = 1\n', 'a later RUN sees the files');
      assert.equal((await sbx.commands.run('ls -a /tmp | grep -c svc-copy || true')).stdout.trim(), '0', 'nothing of the unpacking is left');
    } finally {
      await sbx.kill();
    }

    const again: string[] = [];
    await Template.build(t(), name, { onBuildLogs: (e) => again.push(e.message) });
    assert.ok(again.some((l) => /already cached/.test(l)) && again.some((l) => /cached/.test(l)), again.join('\n'));
    writeFileSync(join(dir, 'app/lib/util.js'), 'exports.x = 2\n');
    await Template.build(t(), name);
    const changed = await Sandbox.create(name);
    assert.equal(await changed.files.read('/srv/app/lib/util.js'), 'exports.x = 2\n', 'changed files make a new build');
    await changed.kill();

    // The upload URL is the credential: no key needed, but a wrong, missing or foreign signature is 401.
    const api = { 'X-API-Key': p.apiKey };
    const hash = randomBytes(32).toString('hex');
    const link = await fetch(`${p.apiUrl}/templates/${name}/files/${hash}`, { headers: api });
    assert.equal(link.status, 201);
    const { present, url } = await link.json() as { present: boolean; url: string };
    assert.equal(present, false);
    assert.ok(url.startsWith(`${p.apiUrl}/templates/files/${hash}?`), url);
    const put = (u: string) => fetch(u, { method: 'PUT', body: 'not much' }).then((r) => r.status);
    assert.equal(await put(url.replace(/signature=[0-9a-f]+/, `signature=${'0'.repeat(64)}`)), 401);
    assert.equal(await put(url.split('?')[0]), 401);
    assert.equal(await put(url.replace(hash, randomBytes(32).toString('hex'))), 401, 'a signature is for its own hash');
    assert.equal(await put(url.replace(/expires=\d+/, 'expires=1')), 401);
    assert.equal((await fetch(`${p.apiUrl}/templates/${name}/files/not-a-hash`, { headers: api })).status, 400);
    assert.equal((await fetch(`${p.apiUrl}/templates/no-such-template/files/${hash}`, { headers: api })).status, 404);
    assert.equal((await fetch(`${p.apiUrl}/templates/${name}/files/${hash}`)).status, 401, 'asking for a link needs the key');
    assert.equal(await put(url), 200);
    assert.equal(((await (await fetch(`${p.apiUrl}/templates/${name}/files/${hash}`, { headers: api })).json()) as { present: boolean }).present, true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await fetch(`${p.apiUrl}/templates/${name}`, { method: 'DELETE', headers: { 'X-API-Key': p.apiKey } });
  }
});

test('secure by default: envd routes refuse a missing, wrong or foreign token and a bad or expired signature', async () => {
  const a = await Sandbox.create('base');
  const b = await Sandbox.create('base');
  try {
    const tokenOf = (s: Sandbox) => (s as unknown as { envdAccessToken?: string }).envdAccessToken;
    assert.ok(tokenOf(a) && tokenOf(b), 'the official SDK sends no `secure`; every sandbox still gets a token');
    const call = (sbx: Sandbox, path: string, opts: { token?: string; method?: string; body?: string; type?: string } = {}) => fetch(`${p.sandboxUrl}${path}`, {
      method: opts.method ?? 'GET',
      headers: {
        'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
        ...(opts.token ? { 'X-Access-Token': opts.token } : {}),
        ...(opts.type ? { 'Content-Type': opts.type } : {}),
      },
      body: opts.body,
      signal: AbortSignal.timeout(10_000),
    });
    const routes: Array<[string, { method?: string; body?: string; type?: string }]> = [
      ['/files?path=/etc/passwd', {}],
      ['/files?path=/tmp/x', { method: 'POST', body: 'pwned', type: 'application/octet-stream' }],
      ['/process.Process/List', { method: 'POST', body: '{}', type: 'application/json' }],
      ['/filesystem.Filesystem/Stat', { method: 'POST', body: '{"path":"/etc/passwd"}', type: 'application/json' }],
      ['/envs', {}],
    ];
    for (const [path, opts] of routes) {
      for (const token of [undefined, 'wrong-token', tokenOf(b)]) {
        const r = await call(a, path, { ...opts, token });
        assert.equal(r.status, 401, `${opts.method ?? 'GET'} ${path} with ${token === undefined ? 'no token' : token === tokenOf(b) ? "another sandbox's token" : 'a wrong token'}`);
        const body = await r.json() as { message: string };
        assert.equal(typeof body.message, 'string');
      }
    }
    assert.equal((await call(a, '/health')).status < 300, true, '/health stays open');
    assert.equal((await call(a, '/files?path=/etc/passwd', { token: tokenOf(a) })).status, 200);
    assert.equal((await a.files.exists('/tmp/x')), false, 'no refused write landed');

    const viaProxy = (signed: string) => { const u = new URL(signed); return `${u.pathname}${u.search}`; };
    await a.files.write('/tmp/signed.txt', 'signed');
    const good = await call(a, viaProxy(await a.downloadUrl('/tmp/signed.txt')));
    assert.equal(await good.text(), 'signed', 'a valid signature is enough');
    const foreign = await call(a, viaProxy(await b.downloadUrl('/tmp/signed.txt')));
    assert.equal(foreign.status, 401, "a URL signed with another sandbox's token");
    const expiring = viaProxy(await a.downloadUrl('/tmp/signed.txt', { useSignatureExpiration: 1 }));
    const expiringUpload = viaProxy(await a.uploadUrl('/tmp/late.txt', { useSignatureExpiration: 1 }));
    await new Promise((r) => setTimeout(r, 2_100));
    assert.equal((await call(a, expiring)).status, 401, 'an expired download signature');
    assert.equal((await call(a, expiringUpload, { method: 'POST', body: 'late', type: 'application/octet-stream' })).status, 401, 'an expired upload signature');
    const tampered = viaProxy(await a.downloadUrl('/tmp/signed.txt')).replace('signed.txt', 'other.txt');
    assert.equal((await call(a, tampered)).status, 401, 'a signature for another path');
  } finally {
    await a.kill();
    await b.kill();
  }
});
