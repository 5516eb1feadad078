/**
 * A sandbox that ended on its own on its node (heartbeat's `ended`): terminated here with the
 * node's reason, announced with it, and read back as a 410 that says why.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { availableTestDatabases } from '../db/test-databases.ts';
import { flush, input, setup, status } from './service-test-support.ts';

const tdb = availableTestDatabases()[0]!;

test('ended on its node: oom and pids_limit are kept as the reason, any other end is failed', async () => {
  const made = await tdb.create!();
  const h = await setup(made.config);
  try {
    const cases = [
      { reason: 'oom' as const, stored: 'oom', says: /ran out of memory and was stopped by its host/ },
      { reason: 'pids_limit' as const, stored: 'pids_limit', says: /started more processes and threads than its host allows a sandbox/ },
      { reason: 'exited' as const, stored: 'failed', says: /was killed/ },
    ];
    for (const c of cases) {
      const { sandboxId } = await h.svc.create(input());
      await h.svc.recordEnded('n1', [{ sandboxId, reason: c.reason, message: 'from the node', endedAt: new Date().toISOString() }]);
      await flush();
      const row = await h.db.kysely.selectFrom('t_svc_sandbox').select(['state', 'terminate_reason']).where('sandbox_id', '=', sandboxId).executeTakeFirstOrThrow();
      assert.deepEqual(row, { state: 'terminated', terminate_reason: c.stored }, c.reason);
      const e = await status(h.svc.get(sandboxId));
      assert.equal(e.status, 410, c.reason);
      assert.match(e.message, c.says, c.reason);
      const killed = h.events.find((ev) => ev.kind === 'sandbox.killed' && ev.sandboxId === sandboxId);
      assert.equal(killed?.reason, c.stored, `${c.reason}: ${JSON.stringify(killed)}`);
    }
    // A second report of the same end changes nothing and announces nothing more.
    const { sandboxId } = await h.svc.create(input());
    const ended = { sandboxId, reason: 'pids_limit' as const, message: 'again', endedAt: new Date().toISOString() };
    await h.svc.recordEnded('n1', [ended]);
    await h.svc.recordEnded('n1', [ended]);
    await flush();
    assert.equal(h.events.filter((ev) => ev.kind === 'sandbox.killed' && ev.sandboxId === sandboxId).length, 1);
  } finally {
    await h.close();
    await made.drop();
  }
});
