import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger, type SvcError } from '@svc/common';
import { LayerStore } from '../artifacts/layer-store.ts';
import { SandboxCapture } from './capture.ts';
import { captureBoundBytes, captureRoomBytes } from './capture-bound.ts';

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
 * `free` bytes free where layers go; each sandbox as its record says (a 100 MB disk holding 1 MiB,
 * 512 MB of memory unless it says otherwise; `used: null`: its stats cannot be read); `write`
 * what the driver's capture writes into the archive given its bound.
 */
interface FakeSandbox { phase: 'running' | 'paused'; pauseKind?: 'snapshot' | 'filesystem'; machine?: boolean; diskSizeMB?: number; used?: number | null }
function node(free: number, sandboxes: Record<string, FakeSandbox>, write: (path: string, maxBytes: number) => Promise<void> = async (p) => writeFile(p, 'layer')): Fake {
  const dir = mkdtempSync(join(tmpdir(), 'svc-capture-'));
  const layers = new LayerStore(dir, silentLogger());
  layers.freeBytes = async () => free;
  const calls: string[] = [];
  let finish!: () => void;
  const held = new Promise<void>((r) => { finish = r; });
  const driverFor = (machine: boolean, used: number | null) => ({
    memoryPauseBlocked: async () => undefined,
    exec: async () => ({ code: 0, stdout: '', stderr: '' }),
    // What the sandbox's disk holds: what its capture reserves (with its memory for a machine), the bound capping what it may write.
    stats: async () => {
      if (used === null) throw new Error('no cgroup for a stopped sandbox');
      return { cpuUsageNs: 0, memUsedBytes: 0, memCacheBytes: 0, diskUsedBytes: used };
    },
    pause: async () => { calls.push('pause'); return { kind: 'snapshot' }; },
    resume: async () => { calls.push('resume'); },
    captureLayer: async (_ref: unknown, path: string, maxBytes: number) => { calls.push(`files ${maxBytes}`); await write(path, maxBytes); if (path.includes('hold')) await held; },
    ...(machine ? { captureMachine: async (_ref: unknown, path: string, maxBytes: number) => { calls.push(`machine ${maxBytes}`); await write(path, maxBytes); } } : {}),
  });
  const insts = Object.fromEntries(Object.entries(sandboxes).map(([id, s]) => [id, {
    record: { sandboxId: id, artifactId: 'a1', phase: s.phase, pauseKind: s.pauseKind, diskSizeMB: s.diskSizeMB ?? 100, memoryMB: 512 },
    ref: { instanceId: `i-${id}`, dir: '/nowhere', netnsPath: '/nowhere' },
    driver: driverFor(!!s.machine, s.used === undefined ? MiB : s.used),
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
/** What a capture of the 100 MB sandbox holding 1 MiB reserves. */
const filesRoom = captureRoomBytes({ diskSizeMB: 100, memoryMB: 512 }, 'filesystem', MiB);
const machineRoom = captureRoomBytes({ diskSizeMB: 100, memoryMB: 512 }, 'memory', MiB);

test('a paused sandbox is captured only where room for what it holds fits: 507 before anything is written', async () => {
  const n = node(filesRoom - 1, { s1: { phase: 'paused', pauseKind: 'filesystem' } });
  try {
    await assert.rejects(n.capture.snapshot('s1', { layerId: 'pause-1' }), (e: SvcError) => e.status === 507 && /the capture of paused sandbox s1 may take up to/.test(e.message));
    assert.deepEqual(n.calls, []);
  } finally {
    rmSync(n.dir, { recursive: true, force: true });
  }
});

test('a capture with memory counts the memory: room for the disk alone is not enough, and nothing is paused', async () => {
  const n = node(filesRoom + MiB, { s1: { phase: 'running', machine: true } });
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
  const n = node(filesRoom + filesRoom / 2, { s1: { phase: 'paused', pauseKind: 'filesystem' }, s2: { phase: 'paused', pauseKind: 'filesystem' } });
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

test('a capture reserves what the sandbox holds, not its whole disk, memory once; what it may write stays capped at its bound', async () => {
  const GB = 1024 * MiB;
  // A 20 GB disk holding 100 MB, on a node with 15 GB free: until 2026-12-01 a 507 (the bound was reserved).
  const big = { phase: 'running' as const, diskSizeMB: 20 * 1024, used: 100 * MiB };
  const n = node(15 * GB, { s1: big, s2: big, m1: { phase: 'running', machine: true } });
  try {
    const bound = captureBoundBytes({ diskSizeMB: 20 * 1024, memoryMB: 512 }, 'filesystem');
    const room = captureRoomBytes({ diskSizeMB: 20 * 1024, memoryMB: 512 }, 'filesystem', 100 * MiB);
    assert.ok(room < 200 * MiB && bound > 15 * GB);
    await n.capture.snapshot('s1', { layerId: 'snap-1', memory: false });
    assert.deepEqual(n.calls, ['pause', `files ${bound}`, 'resume'], 'tar still capped at the whole bound');
    // Captures at once each hold what theirs will likely write, not their whole disk.
    await Promise.all([n.capture.snapshot('s1', { layerId: 'snap-2', memory: false }), n.capture.snapshot('s2', { layerId: 'snap-3', memory: false })]);
  } finally {
    rmSync(n.dir, { recursive: true, force: true });
  }
  // A running machine's capture counts its memory once (memory.state is in its tar): exactly that room is enough.
  const m = node(machineRoom, { m1: { phase: 'running', machine: true } });
  try {
    assert.ok(machineRoom < 600 * MiB);
    await m.capture.snapshot('m1', { layerId: 'snap-m' });
    assert.deepEqual(m.calls, ['pause', `machine ${machineBound}`, 'resume']);
  } finally {
    rmSync(m.dir, { recursive: true, force: true });
  }
});

test('a sandbox whose disk use cannot be read reserves its whole bound', async () => {
  const n = node(filesBound - 1, { s1: { phase: 'paused', pauseKind: 'filesystem', used: null } });
  try {
    await assert.rejects(n.capture.snapshot('s1', { layerId: 'pause-1' }), (e: SvcError) => e.status === 507 && new RegExp(`may take up to ${filesBound} bytes`).test(e.message));
    assert.deepEqual(n.calls, []);
  } finally {
    rmSync(n.dir, { recursive: true, force: true });
  }
});

test('a capture that writes more than was reserved and fills the disk keeps nothing and is a 507; the sandbox runs on', async () => {
  const n = node(filesRoom, { s1: { phase: 'running' } }, async (path) => {
    await writeFile(path, Buffer.alloc(4096));
    throw new Error('tar --create ... exited 2: tar: /state/layers/snap-1.tar.part-1: Cannot write: No space left on device');
  });
  try {
    await assert.rejects(n.capture.snapshot('s1', { layerId: 'snap-1', memory: false }), (e: SvcError) => e.status === 507
      && e.message === `sandbox s1: the disk where this node keeps snapshots filled up while its capture was written (${filesRoom} bytes were set aside for it, what its disk held with a margin): nothing was kept`);
    assert.deepEqual(n.calls, ['pause', `files ${filesBound}`, 'resume']);
    assert.deepEqual(readdirSync(n.dir), []);
  } finally {
    rmSync(n.dir, { recursive: true, force: true });
  }
});
