import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { largestProcess, MemoryGuard, readMemory } from './memory-guard.ts';

/** A fake /proc: meminfo plus processes with a resident size (pages) and an oom_score_adj. */
async function fakeProc(freeKB: number, procs: { pid: number; comm: string; pages: number; adj?: number; state?: string }[]) {
  const dir = await mkdtemp(join(tmpdir(), 'memguard-'));
  await writeFile(join(dir, 'meminfo'), `MemTotal:         262144 kB\nMemFree:          ${freeKB} kB\nMemAvailable:     ${freeKB} kB\n`);
  for (const p of procs) {
    await mkdir(join(dir, String(p.pid)));
    await writeFile(join(dir, String(p.pid), 'statm'), `100000 ${p.pages} 10 1 0 50 0\n`);
    await writeFile(join(dir, String(p.pid), 'stat'), `${p.pid} (${p.comm}) ${p.state ?? 'S'} 1 1 1 0\n`);
    await writeFile(join(dir, String(p.pid), 'oom_score_adj'), `${p.adj ?? 0}\n`);
  }
  return dir;
}

describe('envd memory guard', () => {
  it('reads total and free memory from meminfo', async () => {
    const dir = await fakeProc(1024, []);
    assert.deepEqual(await readMemory(dir), { totalBytes: 262144 * 1024, freeBytes: 1024 * 1024 });
    await rm(dir, { recursive: true });
  });

  it('picks the largest process, skipping protected pids, zombies and oom_score_adj -1000', async () => {
    const dir = await fakeProc(0, [
      { pid: 1, comm: 'tini', pages: 900_000 },
      { pid: 7, comm: 'exempt', pages: 800_000, adj: -1000 },
      { pid: 8, comm: 'zombie', pages: 700_000, state: 'Z' },
      { pid: 9, comm: 'python3', pages: 50_000 },
      { pid: 10, comm: 'sh', pages: 100 },
    ]);
    assert.deepEqual(await largestProcess(dir, new Set([1])), { pid: 9, comm: 'python3', residentBytes: 50_000 * 4096 });
    await rm(dir, { recursive: true });
  });

  it('kills nothing while memory is free, and logs a kill when it is full', async () => {
    const roomy = await fakeProc(200_000, [{ pid: 999_999, comm: 'hog', pages: 60_000 }]);
    const lines: string[] = [];
    const guard = new MemoryGuard({ procDir: roomy, idleIntervalMs: 5, busyIntervalMs: 5, log: (l) => lines.push(l) });
    guard.start();
    await new Promise((r) => setTimeout(r, 50));
    guard.stop();
    assert.deepEqual(lines, []);

    // A real child, so the kill lands on a process this test owns.
    const { spawn } = await import('node:child_process');
    const child = spawn('sleep', ['30']);
    const full = await fakeProc(1_000, [{ pid: child.pid!, comm: 'sleep', pages: 60_000 }]);
    const kills: string[] = [];
    const exited = new Promise((r) => child.once('exit', (_c, sig) => r(sig)));
    const guard2 = new MemoryGuard({ procDir: full, idleIntervalMs: 5, busyIntervalMs: 5, log: (l) => kills.push(l) });
    guard2.start();
    assert.equal(await exited, 'SIGKILL');
    guard2.stop();
    assert.match(kills[0], new RegExp(`killed pid ${child.pid} \\(sleep\\) using 234 MiB`));
    await rm(roomy, { recursive: true });
    await rm(full, { recursive: true });
  });
});
