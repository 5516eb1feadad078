/**
 * Persistent volumes through `svc up` (docs/volumes.md): the official e2b SDK's Volume (records
 * and its content API), our SDK's read-only mounts, sharing between sandboxes, delete while
 * mounted, pause and resume, and the refcounts after random lifecycle operations against a
 * recount from the node's own list.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, Volume, VolumeNotFoundError } from 'e2b';
import { Sandbox as SvcSandbox, Volume as SvcVolume, VolumeMount } from '@svc/sdk';
import { NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';
import { CLUSTER_TOKEN_HEADER } from '@svc/contracts/cluster-token';
import { loadOrCreateSecrets } from '../../packages/cli/src/secrets.ts';
import { startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';

let p: RunningPlatform;
diagnoseFailures(() => p);
before(async () => {
  p = await startPlatform();
  useE2bEnv(p);
});
after(async () => { await p?.stop(); });

const svc = () => ({ apiUrl: p.apiUrl, apiKey: p.apiKey, sandboxUrl: p.sandboxUrl });
const masterUrl = 'http://127.0.0.1:18089';

async function refcounts(): Promise<Map<string, number>> {
  // The master answers cluster_token only, which svc up made.
  const headers = { [CLUSTER_TOKEN_HEADER]: loadOrCreateSecrets(p.dataDir).cluster_token };
  const rows = await (await fetch(`${masterUrl}/v1/volumes/refcounts`, { headers })).json() as Array<{ volumeID: string; refcount: number }>;
  return new Map(rows.map((r) => [r.volumeID, r.refcount]));
}

async function nodeAttachments(): Promise<Array<{ volumeId: string; refCount: number; holders: string[] }>> {
  // The node agent answers its own routes with node_agent.token only, which svc up made.
  const headers = { [NODE_TOKEN_HEADER]: loadOrCreateSecrets(p.dataDir).node_agent_token };
  return (await fetch(`http://${p.env.SVC_NODE_AGENT_LISTEN}/v1/volumes/attachments`, { headers })).json() as never;
}

test('the e2b SDK\'s Volume: files go in before any sandbox; two sandboxes share it, the read-only one cannot write', async () => {
  const name = `shared-${Date.now()}`;
  const vol = await Volume.create(name);
  assert.equal(vol.name, name);
  assert.ok(vol.token, 'the local plugin gives a token');
  await vol.makeDir('/seed');
  await vol.writeFile('/seed/hello.txt', 'seeded before any mount');
  await vol.makeDir('/out');
  assert.equal(await vol.readFile('/seed/hello.txt'), 'seeded before any mount');
  assert.deepEqual((await vol.list('/')).map((e) => e.name).sort(), ['out', 'seed']);
  assert.equal(await vol.exists('/nope'), false);
  assert.equal((await vol.getInfo('/seed/hello.txt')).size, 'seeded before any mount'.length);
  assert.equal((await vol.updateMetadata('/seed/hello.txt', { mode: 0o644 })).mode & 0o777, 0o644);

  const writer = await Sandbox.create('base', { volumeMounts: { '/mnt/shared': vol } });
  const reader = await SvcSandbox.create('base', { ...svc(), volumeMounts: { '/mnt/shared': VolumeMount(vol.volumeId, { readOnly: true }) } });
  try {
    assert.equal((await writer.commands.run('cat /mnt/shared/seed/hello.txt')).stdout, 'seeded before any mount');
    await writer.commands.run('echo "from the writer" > /mnt/shared/out/w.txt');
    assert.equal((await reader.commands.run('cat /mnt/shared/out/w.txt')).stdout, 'from the writer\n', 'the reader sees the write');
    for (const cmd of ['touch /mnt/shared/new', 'echo x >> /mnt/shared/out/w.txt', 'mv /mnt/shared/out/w.txt /mnt/shared/out/v.txt', 'rm /mnt/shared/out/w.txt', 'mkdir /mnt/shared/d']) {
      const r = await reader.commands.run(cmd).catch((e: { exitCode?: number }) => e);
      assert.notEqual((r as { exitCode?: number }).exitCode, 0, `read-only: ${cmd} must fail`);
    }
    assert.equal(await vol.readFile('/out/w.txt'), 'from the writer\n', 'the content API shows what the sandbox wrote');

    const busy = await Volume.destroy(vol.volumeId).then(() => 'deleted', (e: Error) => e.message);
    assert.match(busy, /mounted/, 'delete while mounted is refused (409)');
    assert.equal((await refcounts()).get(vol.volumeId), 1, 'one node holds it');
  } finally {
    await writer.kill();
    await reader.kill();
  }
  assert.equal((await refcounts()).get(vol.volumeId), 0);
  await vol.remove('/seed');
  assert.equal(await vol.exists('/seed/hello.txt'), false);
  assert.equal(await Volume.destroy(vol.volumeId), true);
  assert.equal(await Volume.destroy(vol.volumeId), false, 'false on 404');
  await assert.rejects(Volume.getInfo(vol.volumeId), VolumeNotFoundError);
});

test('our SDK and bad input: a missing volume fails the create, a bad name never leaves the client, list shows no tokens', async () => {
  await assert.rejects(SvcVolume.create('bad name!', svc()), /must match|letters/);
  const v = await SvcVolume.create(`ours-${Date.now()}`, svc());
  assert.ok((await SvcVolume.list(svc())).some((x) => x.volumeId === v.volumeId && !('token' in x)));
  await assert.rejects(Sandbox.create('base', { volumeMounts: { '/mnt/x': 'no-such-volume' } }), /not found/);
  const unknown = await fetch(`${p.apiUrl}/volumes`, { method: 'POST', headers: { 'X-API-Key': p.apiKey, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x1', driver: 'nfs' }) });
  assert.equal(unknown.status, 400);
  assert.equal(((await unknown.json()) as { code: number }).code, 130400);
  const content = await fetch(`${p.apiUrl}/volumecontent/${v.volumeId}/path?path=/`, { headers: { Authorization: 'Bearer not-the-token' } });
  assert.equal(content.status, 401, 'the content API wants the volume\'s token');
  assert.equal(await v.destroy(), true);
});

test('a volume survives pause and resume (memory kept, and a filesystem pause that detaches it)', async () => {
  const vol = await Volume.create(`paused-${Date.now()}`);
  const sbx = await Sandbox.create('base', { volumeMounts: { '/data': vol } });
  try {
    await sbx.commands.run('echo one > /data/f');
    await sbx.pause();
    assert.equal((await refcounts()).get(vol.volumeId), 1, 'a frozen sandbox keeps its mount');
    await sbx.connect();
    assert.equal((await sbx.commands.run('cat /data/f')).stdout, 'one\n');
    const ours = await SvcSandbox.connect(sbx.sandboxId, svc());
    await ours.pause({ keepMemory: false });
    assert.equal((await refcounts()).get(vol.volumeId), 0, 'a filesystem pause detaches');
    await vol.writeFile('/while-paused', 'written while it slept');
    await sbx.connect();
    assert.equal((await sbx.commands.run('cat /data/while-paused')).stdout, 'written while it slept');
    assert.equal((await refcounts()).get(vol.volumeId), 1);
  } finally {
    await sbx.kill();
  }
  assert.equal((await refcounts()).get(vol.volumeId), 0);
  assert.equal(await Volume.destroy(vol.volumeId), true);
});

test('a snapshot records its volume mounts and a create from it mounts the volume\'s current data; a fork shares the volume', async () => {
  const vol = await Volume.create(`snap-${Date.now()}`);
  const origin = await Sandbox.create('base', { volumeMounts: { '/data': vol } });
  const made: Sandbox[] = [origin];
  let snap: { snapshotId: string } | undefined;
  try {
    await origin.commands.run('echo at-snapshot > /data/f');
    snap = await origin.createSnapshot();
    await origin.commands.run('echo later > /data/f');
    const restored = await Sandbox.create(snap.snapshotId);
    made.push(restored);
    assert.equal((await restored.commands.run('cat /data/f')).stdout, 'later\n', 'the volume shows its current data, not a copy');
    const [fork] = (await Sandbox.fork(origin.sandboxId, { count: 1 })).filter((r): r is Sandbox => r instanceof Sandbox);
    assert.ok(fork, 'the fork started');
    made.push(fork);
    await fork.commands.run('echo from-fork > /data/g');
    assert.equal((await origin.commands.run('cat /data/g')).stdout, 'from-fork\n', 'the fork shares the volume');
  } finally {
    for (const s of made) await s.kill().catch(() => { /* best effort: the sandbox may already be gone */ });
    // The data dir outlives the run: a snapshot left here would hold the base template in later runs.
    if (snap) await Sandbox.deleteSnapshot(snap.snapshotId);
  }
  assert.equal(await Volume.destroy(vol.volumeId), true);
});

test('refcounts after 100 random create, pause, resume and kill operations match a recount from the node', async () => {
  const vols = [await Volume.create(`rc-a-${Date.now()}`), await Volume.create(`rc-b-${Date.now()}`)];
  const live: Array<{ sbx: SvcSandbox; paused: false | 'memory' | 'files' }> = [];
  let seed = 20261126;
  const rand = (n: number) => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % n; };
  try {
    for (let i = 0; i < 100; i++) {
      const op = live.length === 0 ? 0 : rand(5);
      if (op === 0 && live.length < 4) {
        const mounts = rand(3) === 0 ? { '/a': vols[0], '/b': vols[1] } : { '/v': vols[rand(2)] };
        const sbx = await SvcSandbox.create('base', { ...svc(), volumeMounts: Object.fromEntries(Object.entries(mounts).map(([k, v]) => [k, v.volumeId])) });
        live.push({ sbx, paused: false });
      } else if (op <= 2 && live.length) {
        const e = live[rand(live.length)];
        if (e.paused) {
          await SvcSandbox.connect(e.sbx.sandboxId, svc());
          e.paused = false;
        } else {
          const memory = rand(2) === 0;
          await e.sbx.pause({ keepMemory: memory });
          e.paused = memory ? 'memory' : 'files';
        }
      } else if (live.length) {
        const [e] = live.splice(rand(live.length), 1);
        await e.sbx.kill();
      }
    }
    const master = await refcounts();
    const recount = new Map<string, number>();
    for (const a of await nodeAttachments()) if (a.holders.some((h) => !h.startsWith('content:'))) recount.set(a.volumeId, 1);
    const held = new Map(vols.map((v) => [v.volumeId, 0]));
    for (const e of live) {
      if (e.paused === 'files') continue;
      const info = await SvcSandbox.getInfo(e.sbx.sandboxId, svc());
      for (const m of info.volumeMounts) held.set(m.name, (held.get(m.name) ?? 0) + 1);
    }
    for (const v of vols) {
      assert.equal(master.get(v.volumeId), recount.get(v.volumeId) ?? 0, `master refcount of ${v.name} against the node's list`);
      const onNode = (await nodeAttachments()).find((a) => a.volumeId === v.volumeId);
      assert.equal(onNode?.refCount ?? 0, held.get(v.volumeId), `node-local count of ${v.name} against the sandboxes that hold it`);
    }
  } finally {
    for (const e of live) await e.sbx.kill().catch(() => { /* best effort: the sandbox may already be gone */ });
  }
  for (const v of vols) {
    assert.equal((await refcounts()).get(v.volumeId), 0);
    assert.equal(await Volume.destroy(v.volumeId), true);
  }
});
