/**
 * The official e2b SDK, pointed at `svc up`, through a sandbox's life: pause and resume (the
 * kind of pause, no metrics samples while paused, files, a background process and a server
 * survive), the filesystem pause and the idle timeout's, list, getInfo, setTimeout, logs and
 * kill of a paused sandbox, snapshots (kept in the artifact store) and fork.
 * Registered by e2b-sdk.test.ts, on the one `svc up` it starts; e2b-sdk-harness.ts says which
 * SDK release runs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';
import { loadOrCreateSecrets } from '../../../packages/cli/src/secrets.ts';
import { hasStatus, Sandbox, platform } from '../e2b-sdk-harness.ts';
import { RUNTIME, sandboxProcesses } from '../harness.ts';


test('pause and resume: no samples while paused, the kind of pause, files, a background process and a server survive', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 600_000 });
  try {
    await sbx.files.write('/home/user/state.txt', 'before pause');
    // Written aside and renamed: a read between a truncate and its write would see an empty file.
    await sbx.commands.run(`nohup sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done' >/dev/null 2>&1 &`);
    await sbx.commands.run('nohup python3 -m http.server 8000 --directory /home/user >/dev/null 2>&1 &');
    // fetch cannot set Host, so name the sandbox the way the SDK's E2B_SANDBOX_URL mode does
    const viaProxy = async () => {
      const res = await fetch(`${platform().sandboxUrl}/state.txt`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' } });
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
    const raw = await fetch(`${platform().apiUrl}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-Key': platform().apiKey } }).then((r) => r.json() as Promise<{ pauseKind?: string }>);
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
  const kind = async (id: string) => (await fetch(`${platform().apiUrl}/sandboxes/${id}`, { headers: { 'X-API-Key': platform().apiKey } }).then((r) => r.json() as Promise<{ state: string; pauseKind?: string }>));
  const sbx = await Sandbox.create('base', { envs: { KEPT_ENV: 'env-back' }, timeoutMs: 600_000 });
  try {
    await sbx.files.write('/home/user/kept.txt', 'kept');
    // /tmp is on the sandbox's disk, as in E2B, not in its memory: it survives this pause too.
    await sbx.files.write('/tmp/kept-too.txt', 'kept in /tmp');
    await sbx.commands.run('nohup sleep 1000 >/dev/null 2>&1 &');
    const runsc = () => sandboxProcesses(platform().dataDir, sbx.sandboxId);
    assert.ok(runsc().length > 0, 'its runtime processes are found while it runs');
    assert.equal(await sbx.pause({ keepMemory: false }), true);
    assert.deepEqual(await kind(sbx.sandboxId), { ...(await kind(sbx.sandboxId)), state: 'paused', pauseKind: 'filesystem' });
    assert.deepEqual(runsc(), [], 'its runtime processes (sentry and gofer, or QEMU) are gone');
    // Traffic does not wake it: E2B's proxy answers a sandbox that is not running with 502 on the envd port.
    const poke = await fetch(`${platform().sandboxUrl}/health`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } });
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

  const refused = await fetch(`${platform().apiUrl}/sandboxes`, {
    method: 'POST', headers: { 'X-API-Key': platform().apiKey, 'Content-Type': 'application/json' },
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
  const logs = async () => fetch(`${platform().apiUrl}/v2/sandboxes/${sbx.sandboxId}/logs`, { headers: { 'X-API-Key': platform().apiKey } });
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
    const nodeAgent = `http://${platform().env.SVC_NODE_AGENT_LISTEN}`;
    const headers = { [NODE_TOKEN_HEADER]: loadOrCreateSecrets(platform().dataDir).node_agent_token };
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
    const api = { 'X-API-Key': platform().apiKey, 'Content-Type': 'application/json' };
    const tpl = await fetch(`${platform().apiUrl}/templates/base`, { method: 'DELETE', headers: api });
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
