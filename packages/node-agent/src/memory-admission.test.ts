import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import { admissionRefusal, type NodeLoad } from '@svc/contracts/node-agent';
import { MemoryGauge, defaultReserveMB, perSandboxMB } from './host/memory-gauge.ts';
import { MemoryAdmission } from './sandboxes/memory-admission.ts';

const node = (o: Partial<NodeLoad> = {}): NodeLoad => ({ availableMB: 20_000, reserveMB: 1_000, perSandboxMB: 25, quotaMB: 400_000, usedNominalMB: 0, cpuPressurePct: 10, maxCpuPressurePct: 0, ...o });

test('admission goes by measured memory above the reserve, and by the nominal quota', () => {
  assert.equal(admissionRefusal(node(), 512), undefined);
  assert.equal(admissionRefusal(node({ availableMB: 1_025 }), 512), undefined);
  assert.ok(admissionRefusal(node({ availableMB: 1_024 }), 512), '24 MB over the reserve is not enough for 25');
  assert.match(admissionRefusal(node({ availableMB: 1_020 }), 512)!, /1020 MB of memory available, 1000 MB kept in reserve, a sandbox here uses about 25 MB/);
  assert.match(admissionRefusal(node({ availableMB: 1_100 }), 512, 100)!, /100 MB promised/);
  assert.equal(admissionRefusal(node({ cpuPressurePct: 99 }), 512), undefined, 'no CPU term when max_cpu_pressure is 0');
  assert.match(admissionRefusal(node({ cpuPressurePct: 91, maxCpuPressurePct: 90 }), 512)!, /CPU pressure 91% .* max_cpu_pressure 90%/);
  assert.equal(admissionRefusal(node({ cpuPressurePct: 89, maxCpuPressurePct: 90 }), 512), undefined);
  assert.match(admissionRefusal(node({ usedNominalMB: 399_800 }), 512)!, /nominal memory quota 400000 MB .* has 200 MB left, the sandbox asks 512 MB/);
});

test('a new sandbox is expected to take the measured average, never less than the floor', () => {
  assert.equal(perSandboxMB(2_500, 100), 25);
  assert.equal(perSandboxMB(100, 100), 16);
  assert.equal(perSandboxMB(0, 0), 16);
  assert.equal(defaultReserveMB(24_000), 1_200);
  assert.equal(defaultReserveMB(4_000), 512);
});

test('the gauge reads the host and a cgroup; the node refuses creates past its reserve, counting those under way', async () => {
  const r = await new MemoryGauge('no-such-parent').read();
  assert.ok(r.totalMB > 0 && r.availableMB > 0 && r.availableMB <= r.totalMB);
  assert.equal(r.sandboxesMB, 0);
  // A reserve that leaves room for exactly two more 16 MB sandboxes.
  const gauge = { read: async () => ({ totalMB: 4_000, availableMB: 2_040, sandboxesMB: 0, cpuPressurePct: 5 }) };
  const admission = new MemoryAdmission({
    gauge, logger: silentLogger(), quotaMB: 1e9, reserveMB: 2_000, maxCpuPressurePct: 0, usage: () => ({ usedNominalMB: 0, sandboxes: 0 }),
  });
  const first = await admission.admit(512);
  await admission.admit(512);
  await assert.rejects(admission.admit(512), (e: { status: number; message: string }) => e.status === 503 && /promised to creates under way/.test(e.message));
  first();
  await admission.admit(512);
});

test('creates that arrive together are admitted one after another: never past the nominal quota or the reserve', async () => {
  // Each reading takes a while, as a real one does: concurrent creates would all read the same free memory.
  const gauge = { read: async () => { await new Promise((r) => setTimeout(r, 5)); return { totalMB: 8_000, availableMB: 7_000, sandboxesMB: 0, cpuPressurePct: 5 }; } };
  const admission = new MemoryAdmission({
    gauge, logger: silentLogger(), quotaMB: 2_048, reserveMB: 1_000, maxCpuPressurePct: 0, usage: () => ({ usedNominalMB: 0, sandboxes: 0 }),
  });
  const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => admission.admit(512)));
  assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 4, '2048 MB of quota holds four 512 MB sandboxes');
  assert.ok(outcomes.filter((o) => o.status === 'rejected').every((o) => /nominal memory quota 2048 MB/.test((o as PromiseRejectedResult).reason.message)));
  for (const o of outcomes) if (o.status === 'fulfilled') o.value();
  await admission.admit(512);
});
