import { test } from 'node:test';
import assert from 'node:assert/strict';
import { usageSeries } from './team-series.tsx';

test('an hour keeps its 5 s intervals, the gaps as zeros', () => {
  const s = usageSeries([{ timestampUnix: 1010, concurrentSandboxes: 3, sandboxStartRate: 0.4 }], 1000, 4600, 720);
  assert.equal(s.concurrent.length, 720);
  assert.deepEqual(s.concurrent[2], { t: 1_010_000, v: 3 });
  assert.equal(s.concurrent[1]!.v, 0);
  assert.equal(s.rate[2]!.v, 0.4);
});

test('a week folds into at most 500 points: max for concurrent, mean for the rate', () => {
  const start = 0;
  const end = 7 * 86_400;
  const metrics = [
    { timestampUnix: 0, concurrentSandboxes: 1, sandboxStartRate: 1 },
    { timestampUnix: 5, concurrentSandboxes: 7, sandboxStartRate: 0 },
    { timestampUnix: 10, concurrentSandboxes: 2, sandboxStartRate: 1 },
  ];
  const s = usageSeries(metrics, start, end, 500);
  assert.ok(s.concurrent.length <= 500, `${s.concurrent.length} points`);
  const bucketS = (s.concurrent[1]!.t - s.concurrent[0]!.t) / 1000;
  assert.equal(bucketS % 5, 0);
  assert.equal(s.concurrent[0]!.v, 7);
  assert.equal(s.rate[0]!.v, 2 / (bucketS / 5));
  assert.equal(s.concurrent.at(-1)!.v, 0);
});

test('intervals outside the range are left out', () => {
  const s = usageSeries([{ timestampUnix: 50, concurrentSandboxes: 9, sandboxStartRate: 1 }], 100, 200, 500);
  assert.ok(s.concurrent.every((p) => p.v === 0));
});
