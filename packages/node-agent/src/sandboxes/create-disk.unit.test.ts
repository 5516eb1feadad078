import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger, type SvcError } from '@svc/common';
import type { CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { SandboxCreator } from './create.ts';

/** Just enough of a node for a create to reach its disk check (the rest is sandboxes.test.ts, with runsc). */
function creatorWithFree(freeBytes: number, started: string[]): SandboxCreator {
  const d = {
    logger: silentLogger(),
    layers: { freeBytes: async () => freeBytes },
    drivers: { forCreate: () => ({ kind: 'gvisor' }), find: () => undefined },
    artifacts: { ensure: async () => { started.push('artifact'); throw new Error('stop here: the check passed'); } },
  };
  const table = { locks: { run: (_id: string, fn: () => Promise<unknown>) => fn() }, has: () => false };
  const network = { learnHosts: async () => {} };
  return new SandboxCreator(d as never, table as never, {} as never, network as never, () => undefined);
}

const req = { sandboxId: 'sbx1', artifact: { artifactId: 'a1' }, memoryMB: 256, cpuCount: 1, diskSizeMB: 1024, timeoutMs: 5_000, allowInternetAccess: true, network: { allowOut: [], denyOut: [] } } as unknown as CreateSandboxOnNode;

test('a node with less than 2 GiB free on its state disk takes no new sandbox: 503, so the master asks the next node', async () => {
  const started: string[] = [];
  await assert.rejects(creatorWithFree(1_500_000_000, started).create(req), (e: SvcError) => e.status === 503 && /this node's disk has 1\.4 GiB free, under the 2 GiB it keeps/.test(e.message));
  assert.deepEqual(started, [], 'nothing of the create began');
  await assert.rejects(creatorWithFree(3 * 1_073_741_824, started).create(req), /stop here: the check passed/);
  assert.deepEqual(started, ['artifact']);
});
