import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import { WARM_POLICY, type EgressPolicy } from '../network/egress-policy.ts';
import { CONSOLE_MAX_BYTES } from '../runtime/console-file.ts';
import type { Instance } from './instances.ts';
import { NodeSandboxes, type NodeSandboxesDeps } from './node-sandboxes.ts';

const SHAPE = { cpuCount: 1, memoryMB: 256, diskSizeMB: 512 };

/** NodeSandboxes over a launcher whose "sandboxes" are a console file each, in `dir`. */
function sandboxes(dir: string) {
  const launched: Array<{ role: string; policy: EgressPolicy }> = [];
  let n = 0;
  const launcher = {
    launch: async (o: { role: string; policy: EgressPolicy }) => {
      launched.push(o);
      const instanceId = `w${++n}`;
      const console = join(dir, `${instanceId}.log`);
      await writeFile(console, '');
      return { record: { instanceId, runtime: 'gvisor', artifactId: 'a1', role: o.role, policy: o.policy }, ref: { instanceId, console } } as unknown as Instance;
    },
    teardown: async () => {},
  };
  const drivers = { of: () => ({ consolePath: (ref: { console: string }) => ref.console }) };
  const d = {
    logger: silentLogger(), launcher, drivers, firewall: {}, records: {}, capacity: { cpuCount: 2, memoryMB: 4096 }, releaseRatio: 1,
    warmPoolSize: 1, warmPoolInitial: 1, warmPoolMax: 1, warmShape: SHAPE, warmRuntime: 'gvisor', volumes: {},
  } as unknown as NodeSandboxesDeps;
  return { s: new NodeSandboxes(d), launched };
}

test('warm sandboxes wait with no egress, and their console files are capped like any sandbox\'s', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-warm-'));
  const { s, launched } = sandboxes(dir);
  t.after(async () => { await s.close(); await rm(dir, { recursive: true, force: true }); });
  s.pool.fill('a1');
  const end = Date.now() + 3_000;
  while (s.pool.count() < 1) { if (Date.now() > end) assert.fail('pool did not fill'); await new Promise((r) => setTimeout(r, 5)); }
  assert.equal(launched[0]!.role, 'warm');
  assert.deepEqual(launched[0]!.policy, WARM_POLICY);
  assert.equal(WARM_POLICY.allowInternetAccess, false);
  assert.deepEqual([WARM_POLICY.allowOut, WARM_POLICY.steer, WARM_POLICY.tunnel], [[], [], undefined]);
  // A warm sandbox's template files ran and wrote past the cap (a sparse file: no disk spent).
  const console = join(dir, 'w1.log');
  await truncate(console, CONSOLE_MAX_BYTES + 1);
  await s.capConsoles();
  assert.ok((await stat(console)).size < 1024, 'the warm sandbox\'s console file was cut');
});
