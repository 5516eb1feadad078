import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderMetrics, silentLogger } from '@svc/common';
import type { Instance } from './instances.ts';
import { WarmPool } from './warm-pool.ts';
import { collectWarmPoolMetrics } from './warm-pool-metrics.ts';

const SHAPE = { cpuCount: 1, memoryMB: 512, diskSizeMB: 2048 };

async function until(cond: () => boolean, ms = 3_000) {
  const end = Date.now() + ms;
  while (!cond()) { if (Date.now() > end) assert.fail('timed out'); await new Promise((r) => setTimeout(r, 5)); }
}

const series = async () => (await renderMetrics()).body.split('\n').filter((l) => l.startsWith('svc_warm_pool_sandboxes{'));

test('svc_warm_pool_sandboxes: each artifact\'s ready sandboxes, under the template whose create last asked for it; gone once the agent closes', async () => {
  let n = 0;
  const pool = new WarmPool({
    size: 2, max: 2, shape: SHAPE, logger: silentLogger(), refillDelayMs: 60_000,
    start: async (artifactId) => ({ record: { artifactId, instanceId: `w${++n}` } }) as unknown as Instance,
    destroy: async () => {},
  });
  const stop = collectWarmPoolMetrics(pool, silentLogger());
  try {
    pool.fill('art-1');
    await until(() => pool.count() === 2);
    assert.deepEqual(await series(), ['svc_warm_pool_sandboxes{template="",artifact="art-1"} 2'], 'filled when the artifact came: no template named it yet');
    assert.ok(await pool.take('art-1', SHAPE, 'tpl-base'));
    assert.deepEqual(await series(), ['svc_warm_pool_sandboxes{template="tpl-base",artifact="art-1"} 1']);
  } finally {
    stop();
    await pool.close();
  }
  assert.deepEqual(await series(), []);
});
