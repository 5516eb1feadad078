import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { progressKey, type JobProgress } from '@svc/contracts/template-center';
import { startHarness, type Harness } from './test-support/harness.ts';
import { startMiniRegistry, type MiniRegistry } from './test-support/mini-registry.ts';
import { OciLayoutWriter, writeMinimalRootfsTar } from './test-support/oci-builder.ts';

/**
 * POST /tc/api/v1/build/:jobId/cancel, which the master sends when a template is deleted during
 * its build: before it, such a build held one of the template center's slots until it ended or
 * reached master.build_timeout_sec (an hour). And the slots' turns between teams (BuildRequest.queue).
 */
const CANCELLED = 'the build was cancelled because its template was deleted';

let scratch: string;
let slow: MiniRegistry;
let tarball: string;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-cancel-'));
  const layout = join(scratch, 'layout');
  const w = new OciLayoutWriter(layout);
  await w.tag({ layers: [{ entries: [{ name: 'etc/', type: 'directory' }] }, { entries: [{ name: 'payload', content: randomBytes(2 * 1024 * 1024) }] }] }, 'v1');
  await w.write();
  // 2 MiB at 64 KiB/s: half a minute, long past the test's cancel.
  slow = await startMiniRegistry(layout, { slowBytesPerSec: 64 * 1024 });
  tarball = join(scratch, 'rootfs.tar');
  await writeMinimalRootfsTar(tarball);
});

after(async () => {
  await slow?.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** Waits until the job's pull has bytes in: it holds a slot and has begun to build. */
async function pulling(h: Harness, jobId: string): Promise<void> {
  for (let i = 0; ; i++) {
    const raw = await h.coordination.kvGet(progressKey(jobId));
    const p = raw ? (JSON.parse(raw) as JobProgress) : undefined;
    if ((p?.layers[1]?.doneBytes ?? 0) > 0) return;
    assert.ok(i < 400, 'the pull did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('cancel: unknown is false; a queued job leaves the queue, a running one stops and removes its work; both free their slot and report FAILED', async () => {
  // The one slot from the configuration (template_center.max_concurrent_builds), as an operator sets it.
  const h = await startHarness({ config: { max_concurrent_builds: 1 } });
  try {
    assert.deepEqual(await h.client.cancelBuild('job-never-submitted'), { cancelled: false });

    const running = await h.submit({ kind: 'registry', ref: `${slow.host}/test/app:v1`, insecure: true }, { queue: 'team-a' });
    await pulling(h, running.jobId);
    assert.notDeepEqual(await h.leftovers(), [], 'the running build has its staging tree and partial download');
    const queued = await h.submit({ kind: 'rootfs-tar', path: tarball }, { queue: 'team-c' });
    // Fast builds behind the held slot: two of team-a, then one of team-b.
    const a2 = await h.submit({ kind: 'rootfs-tar', path: tarball }, { queue: 'team-a' });
    const a3 = await h.submit({ kind: 'rootfs-tar', path: tarball }, { queue: 'team-a' });
    const b1 = await h.submit({ kind: 'rootfs-tar', path: tarball }, { queue: 'team-b' });

    assert.deepEqual(await h.client.cancelBuild(queued.jobId), { cancelled: true });
    const q = await h.master.final(queued.jobId, 10_000);
    assert.deepEqual(q, { status: 'FAILED', error: CANCELLED });
    assert.ok(!h.master.reports.get(queued.jobId)!.some((r) => r.status === 'RUNNING'), 'it never got a slot');
    assert.ok(!h.master.reports.has(a2.jobId), 'the running build holds the only slot still');

    assert.deepEqual(await h.client.cancelBuild(running.jobId), { cancelled: true });
    const r = await h.master.final(running.jobId, 10_000);
    assert.deepEqual(r, { status: 'FAILED', error: CANCELLED });
    assert.equal(existsSync(join(h.artifactDir, `${running.artifactId}.ext4`)), false);

    // The freed slot goes round: the cancelled queued job is skipped, and team-b's build comes
    // second, not behind both of team-a's.
    for (const req of [a2, a3, b1]) assert.equal((await h.master.final(req.jobId, 60_000)).status, 'BUILT');
    const firstRunning = (jobId: string) => h.master.events.find((e) => e.jobId === jobId && e.report.status === 'RUNNING')!.at;
    assert.deepEqual([a2, a3, b1].sort((x, y) => firstRunning(x.jobId) - firstRunning(y.jobId)).map((x) => x.jobId), [a2.jobId, b1.jobId, a3.jobId]);

    assert.deepEqual(await h.client.cancelBuild(a2.jobId), { cancelled: false }, 'a finished job is not here any more');
    for (let i = 0; h.tc.activeJobs() > 0; i++) {
      assert.ok(i < 100, 'the jobs ended after their reports');
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.deepEqual(await h.leftovers(), [], 'the cancelled build removed its staging tree, image and partial download');
  } finally {
    await h.close();
  }
});
