import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import { MAX_SAMPLES_PER_REPORT, type SandboxMetricSample } from '@svc/contracts/metrics-history';
import type { SandboxMetrics } from '@svc/contracts/node-agent';
import { MetricsSampler } from './metrics-sampler.ts';

const sample = (cpu: number): SandboxMetrics => ({ timestampUnix: 1, cpuCount: 1, cpuUsedPct: cpu, memUsed: 1, memTotal: 2, memCache: 0, diskUsed: 3, diskTotal: 4 });

test('a round reads each running sandbox and sends the samples; one that ends under the read is skipped', async () => {
  const sent: SandboxMetricSample[][] = [];
  const s = new MetricsSampler({
    logger: silentLogger(), running: () => ['a', 'gone', 'b'], stillRunning: () => true,
    read: async (id) => { if (id === 'gone') throw new Error('no such sandbox'); return sample(id === 'a' ? 10 : 20); },
    send: async (batch) => { sent.push(batch); },
  });
  await s.tick();
  assert.deepEqual(sent.map((b) => b.map((x) => [x.sandboxId, x.cpuUsedPct])), [[['a', 10], ['b', 20]]]);
  await s.tick();
  assert.equal(sent.length, 2, 'the next round sends only its own samples');
  assert.equal(sent[1]!.length, 2);
});

test('samples the master did not take are kept and sent with the next round', async () => {
  let up = false;
  const sent: SandboxMetricSample[][] = [];
  const s = new MetricsSampler({
    logger: silentLogger(), running: () => ['a'], stillRunning: () => true, read: async () => sample(1),
    send: async (batch) => { if (!up) throw new Error('master down'); sent.push(batch); },
  });
  await s.tick();
  await s.tick();
  assert.equal(sent.length, 0, 'nothing reached a master that is down');
  up = true;
  await s.tick();
  assert.equal(sent.flat().length, 3, 'the two kept rounds went with the third');
});

test('a node with more running sandboxes than one report holds sends several reports', async () => {
  const ids = Array.from({ length: MAX_SAMPLES_PER_REPORT + 10 }, (_, i) => `s${i}`);
  const sizes: number[] = [];
  const s = new MetricsSampler({ logger: silentLogger(), running: () => ids, stillRunning: () => true, read: async () => sample(0), send: async (b) => { sizes.push(b.length); } });
  await s.tick();
  assert.deepEqual(sizes, [MAX_SAMPLES_PER_REPORT, 10]);
});

test('a sandbox paused while it was read has no sample (its cgroup still answers)', async () => {
  let phase = 'running';
  const sent: SandboxMetricSample[][] = [];
  const s = new MetricsSampler({
    logger: silentLogger(), running: () => ['a'], stillRunning: () => phase === 'running',
    read: async () => { phase = 'paused'; return sample(5); }, send: async (b) => { sent.push(b); },
  });
  await s.tick();
  assert.deepEqual(sent, []);
});
