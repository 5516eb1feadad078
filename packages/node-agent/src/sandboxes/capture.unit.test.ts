import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger, type SvcError } from '@svc/common';
import { LayerStore } from '../artifacts/layer-store.ts';
import { SandboxCapture } from './capture.ts';
import { captureBoundBytes } from './capture-bound.ts';

const MiB = 1024 * 1024;

interface Fake {
  capture: SandboxCapture;
  calls: string[];
  dir: string;
  /** Lets a capture that waits on it (hold) finish. */
  finish: () => void;
}

/**
 * A node of sandboxes held by fakes (the runtimes' own captures are tested with runsc and QEMU):
 * `free` bytes free where layers go; each sandbox as its record says; `write` what the driver's
 * capture writes into the archive given its bound.
 */
function node(free: number, sandboxes: Record<string, { phase: 'running' | 'paused'; pauseKind?: 'snapshot' | 'filesystem'; machine?: boolean }>, write: (path: string, maxBytes: number) => Promise<void> = async (p) => writeFile(p, 'layer')): Fake {
  const dir = mkdtempSync(join(tmpdir(), 'svc-capture-'));
  const layers = new LayerStore(dir, silentLogger());
  layers.freeBytes = async () => free;
  const calls: string[] = [];
  let finish!: () => void;
  const held = new Promise<void>((r) => { finish = r; });
  const driverFor = (machine: boolean) => ({
    memoryPauseBlocked: async () => undefined,
    exec: async () => ({ code: 0, stdout: '', stderr: '' }),
    // Blocks the image holds: what the check read until 2026-12-01, far below what tar may write.
    stats: async () => ({ cpuUsageNs: 0, memUsedBytes: 0, memCacheBytes: 0, diskUsedBytes: MiB }),
    pause: async () => { calls.push('pause'); return { kind: 'snapshot' }; },
    resume: async () => { calls.push('resume'); },
    captureLayer: async (_ref: unknown, path: string, maxBytes: number) => { calls.push(`files ${maxBytes}`); await write(path, maxBytes); if (path.includes('hold')) await held; },
    ...(machine ? { captureMachine: async (_ref: unknown, path: string, maxBytes: number) => { calls.push(`machine ${maxBytes}`); await write(path, maxBytes); } } : {}),
  });
  const insts = Object.fromEntries(Object.entries(sandboxes).map(([id, s]) => [id, {
    record: { sandboxId: id, artifactId: 'a1', phase: s.phase, pauseKind: s.pauseKind, diskSizeMB: 100, memoryMB: 512 },
    ref: { instanceId: `i-${id}`, dir: '/nowhere', netnsPath: '/nowhere' },
    driver: driverFor(!!s.machine),
  }]));
  const table = {
    locks: { run: (_id: string, fn: () => Promise<unknown>) => fn() },
    find: (id: string) => insts[id],
    driverOf: (inst: { driver: unknown }) => inst.driver,
  };
  return { capture: new SandboxCapture({ logger: silentLogger(), layers }, table as never), calls, dir, finish };
}

const filesBound = captureBoundBytes({ diskSizeMB: 100, memoryMB: 512 }, 'filesystem');
const machineBound = captureBoundBytes({ diskSizeMB: 100, memoryMB: 512 }, 'memory');

test('a paused sandbox is captured only where its bound fits: 507 before anything is written', async () => {
  const n = node(filesBound - 1, { s1: { phase: 'paused', pauseKind: 'filesystem' } });
  try {
    await assert.rejects(n.capture.snapshot('s1', { layerId: 'pause-1' }), (e: SvcError) => e.status === 507 && /the capture of paused sandbox s1 may take up to/.test(e.message));
    assert.deepEqual(n.calls, []);
  } finally {
    rmSync(n.dir, { recursive: true, force: true });
  }
});

test('a capture with memory counts the memory: room for the disk alone is not enough, and nothing is paused', async () => {
  const n = node(filesBound + MiB, { s1: { phase: 'running', machine: true } });
  try {
    await assert.rejects(n.capture.snapshot('s1', { layerId: 'snap-1' }), (e: SvcError) => e.status === 507);
    assert.deepEqual(n.calls, []);
    // Without its memory the same sandbox fits.
    await n.capture.snapshot('s1', { layerId: 'snap-2', memory: false });
    assert.deepEqual(n.calls, ['pause', `files ${filesBound}`, 'resume']);
  } finally {
    rmSync(n.dir, { recursive: true, force: true });
  }
});

test('captures at once do not each pass on the same free room', async () => {
  const n = node(filesBound + filesBound / 2, { s1: { phase: 'paused', pauseKind: 'filesystem' }, s2: { phase: 'paused', pauseKind: 'filesystem' } });
  try {
    const first = n.capture.snapshot('s1', { layerId: 'hold-1' });
    await new Promise((r) => setTimeout(r, 20));
    await assert.rejects(n.capture.snapshot('s2', { layerId: 'snap-2' }), (e: SvcError) => e.status === 507 && /under way/.test(e.message));
    n.finish();
    await first;
    // The first one's room is given back once it is written (its layer is on the disk now).
    await n.capture.snapshot('s2', { layerId: 'snap-3' });
  } finally {
    rmSync(n.dir, { recursive: true, force: true });
  }
});

test('a capture that reaches its bound fails with a 507 that says why, keeps nothing, and the sandbox runs on', async () => {
  // As tar under RLIMIT_FSIZE: the archive stops at the bound and the command fails.
  const n = node(10 * machineBound, { s1: { phase: 'running', machine: true } }, async (path, maxBytes) => {
    await writeFile(path, '');
    await truncate(path, maxBytes);
    throw new Error('prlimit --fsize ... tar --create ... exited 153');
  });
  try {
    await assert.rejects(n.capture.snapshot('s1', { layerId: 'snap-1' }), (e: SvcError) => e.status === 507
      && e.message === `sandbox s1: its capture reached ${machineBound} bytes, more than its 100 MB disk and 512 MB of memory can hold (a file in it claims more bytes than the disk has): nothing was kept`);
    assert.deepEqual(n.calls, ['pause', `machine ${machineBound}`, 'resume']);
    assert.deepEqual(readdirSync(n.dir), []);
  } finally {
    rmSync(n.dir, { recursive: true, force: true });
  }
});
