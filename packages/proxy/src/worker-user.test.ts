/**
 * proxy.worker_user (docs/security.md, "The data-plane proxy's workers"): a primary that is root
 * forks workers that listen, then become the account, with no supplementary group and no
 * capability, and serve as before; an account the host has not stops the start, naming the
 * setting. Root only (CI runs as root): elsewhere there is nothing to give up.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { systemAccount } from '@svc/common';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream } from './testing/harness.ts';
import { proxyWorkerSourceEntry } from './worker.ts';

const root = process.getuid?.() === 0;

/** A field of /proc/<pid>/status (Uid, Gid, Groups, CapEff...), its values split. */
function status(pid: number, field: string): string[] {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`));
  return (line ?? '').slice(field.length + 1).trim().split(/\s+/).filter(Boolean);
}

test('workers run as proxy.worker_user once they listen, and serve', { skip: !root && 'needs root' }, async () => {
  const nobody = systemAccount('nobody');
  const up = new Upstream('a');
  await up.listen();
  const p = await startPlatform({ workers: { count: 1, entry: proxyWorkerSourceEntry() }, workerUser: 'nobody' });
  try {
    p.master.add({ sandboxId: 'as-nobody', envdPort: up.port });
    const r = await call(p.proxy.httpUrl, { host: sandboxHost(0, 'as-nobody'), headers: { 'E2b-Sandbox-Id': 'as-nobody' } });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.json<{ upstream: string }>().upstream, 'a');
    const [pid] = p.proxy.pids!();
    assert.deepEqual(status(pid, 'Uid'), Array(4).fill(String(nobody.uid)), 'real, effective, saved and file uid');
    assert.deepEqual(status(pid, 'Gid'), Array(4).fill(String(nobody.gid)));
    assert.deepEqual(status(pid, 'Groups'), [], 'no supplementary group');
    assert.equal(BigInt(`0x${status(pid, 'CapEff')[0]}`), 0n, 'no capability');
    assert.equal(BigInt(`0x${status(pid, 'CapPrm')[0]}`), 0n, 'none to take back');
    // The primary keeps root: it holds the listeners and forks the next worker.
    assert.equal(process.getuid!(), 0);
  } finally {
    await p.close();
    await up.close();
  }
});

test('an account the host has not stops the start, naming proxy.worker_user', { skip: !root && 'needs root' }, async () => {
  await assert.rejects(
    startPlatform({ workers: { count: 1, entry: proxyWorkerSourceEntry() }, workerUser: 'svc-no-such-user' }),
    /^Error: proxy\.worker_user: there is no account svc-no-such-user in \/etc\/passwd; name an unprivileged account of this host, or set it to '' to keep the workers root$/,
  );
});
