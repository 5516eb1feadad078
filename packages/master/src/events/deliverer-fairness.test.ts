/**
 * Fair share between teams (deliverer.ts, WebhookRepo.dueWebhooks). Until the fix the queue was
 * read DISTINCT ... LIMIT with no order, and one team with 16 webhooks at a tarpit filled all 64
 * attempts of a master: every other team's deliveries waited for the tarpit's timeouts, minutes
 * with E2B's retries. Now one team holds at most a quarter of the attempts (at least 4), and
 * webhooks are read oldest due first, past the teams at their share.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomId } from '@svc/common';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { CREATED, subject, waitFor, withHarness } from './deliverer-harness.ts';
import { WebhookRepo } from './webhook-repo.ts';

const TARPIT_TEAM = 'team-tarpit';
const OTHER_TEAM = 'team-other';

test('a team with many webhooks at a tarpit holds a quarter of the attempts; another team\'s delivery goes out at once', () => withHarness(async (h) => {
  const tarpit = await h.endpoint(() => 'hang');
  for (let i = 0; i < 12; i++) await h.hook(tarpit.url, [CREATED], true, TARPIT_TEAM);
  // Queued first: the tarpit's deliveries are the oldest due.
  for (let i = 0; i < 3; i++) await h.recorder.record(subject(undefined, TARPIT_TEAM), CREATED);
  const ep = await h.endpoint();
  const other = await h.hook(ep.url, [CREATED], true, OTHER_TEAM);
  await h.recorder.record(subject(undefined, OTHER_TEAM), CREATED);

  // 8 at once: a team's share is 4 (a quarter, at least 4).
  h.deliverer('master-a', { maxInFlight: 8, timeoutMs: 5_000 });
  await waitFor('the other team\'s delivery', () => ep.hits.length === 1, 1500).catch((err: Error) => {
    throw new Error(`${err.message}: it waits behind the tarpit team's attempts (${tarpit.hits.length} of them hanging)`);
  });
  // The endpoint answers before the deliverer writes the outcome: under load (.ci/run) the read
  // right after the hit came first.
  let outcome: string | undefined;
  await waitFor('the other team\'s delivery is recorded', async () => (outcome = (await h.last(other.id, OTHER_TEAM))?.outcome) !== undefined, 1500);
  assert.equal(outcome, 'delivered');
  await waitFor('the tarpit holds its share', () => tarpit.hits.length >= 4, 1000);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(tarpit.hits.length, 4, 'the tarpit team holds 4 attempts, not the 7 left');
}));

// The read is SQL of its own (GROUP BY, MIN, NOT IN over a join): on every engine the environment offers.
for (const engine of availableTestDatabases()) {
  test(`due webhooks are read oldest first, across teams, leaving out the webhooks and teams named, on ${engine.driver}`, { skip: engine.skip }, async () => {
    const tdb = await engine.create!();
    const db = await openDatabase(tdb.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const repo = new WebhookRepo(db.kysely);
      const now = Date.now();
      const hook = async (team: string, dueAt: number[]) => {
        const id = `wh-${randomId(8)}`;
        await repo.insert({ webhook_id: id, team_id: team, name: id, url: 'http://192.0.2.1/hook', enabled: 1, events: '[]', sealed_secret: 'v1:x', last_delivery: null, created_at: now, updated_at: now });
        for (const at of dueAt) {
          await db.kysely.insertInto('t_svc_webhook_delivery').values({
            delivery_id: randomId(12), webhook_id: id, event_id: randomId(12), body: '{}', status: 'pending', attempts: 0, next_at: at,
            lease_until: 0, lease_holder: null, last_error: null, created_at: now, done_at: null,
          }).execute();
        }
        return id;
      };
      // Written in another order than they fell due.
      const b = await hook('team-b', [now - 1_000, now - 10]);
      const a = await hook('team-a', [now - 2_000]);
      const c = await hook('team-c', [now - 3_000, now + 60_000]);
      await hook('team-d', [now + 60_000]);
      const read = (skip: { webhooks: string[]; teams: string[] }, limit = 10) => repo.dueWebhooks(now, skip, limit);
      assert.deepEqual(await read({ webhooks: [], teams: [] }), [{ webhookId: c, teamId: 'team-c' }, { webhookId: a, teamId: 'team-a' }, { webhookId: b, teamId: 'team-b' }]);
      assert.deepEqual(await read({ webhooks: [c], teams: ['team-b'] }), [{ webhookId: a, teamId: 'team-a' }]);
      assert.deepEqual(await read({ webhooks: [], teams: [] }, 2), [{ webhookId: c, teamId: 'team-c' }, { webhookId: a, teamId: 'team-a' }], 'the limit keeps the oldest');
    } finally {
      await db.close();
      await tdb.drop();
    }
  });
}
