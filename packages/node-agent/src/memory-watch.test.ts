import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import type { Instance } from './sandboxes/instances.ts';
import { MemoryWatch } from './sandboxes/memory-watch.ts';

const inst = (instanceId: string, memoryMB: number) => ({ record: { instanceId, memoryMB, address: '10.0.0.2' }, ref: {} }) as unknown as Instance;

test('the watch alerts envd once a sandbox holds half its memory, not again within 10 s', async () => {
  const used = new Map<string, number>([['a', 100 * 1024 * 1024], ['b', 300 * 1024 * 1024]]);
  const alerted: string[] = [];
  const watch = new MemoryWatch({
    logger: silentLogger(),
    running: () => [inst('a', 512), inst('b', 512)],
    usedBytes: async (i) => used.get(i.record.instanceId)!,
    alert: async (i) => { alerted.push(i.record.instanceId); },
  });
  await watch.sweep();
  assert.deepEqual(alerted, ['b']);
  used.set('a', 400 * 1024 * 1024);
  await watch.sweep();
  assert.deepEqual(alerted, ['b', 'a'], 'a crossed half; b was alerted moments ago');
});
