import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EVENT_LIMITS, type SandboxEventType } from '@svc/contracts/events';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { migrations } from '../migrations/index.ts';
import { WebhookRepo } from './webhook-repo.ts';
import type { WebhookTargets } from './webhook-target.ts';
import { WebhookService } from './webhooks.ts';

/**
 * The 50-webhook limit under creates sent together: each count waits a little, as a count on a
 * busy PostgreSQL or MariaDB does, so every create counts before any inserts. Before 2026-11-30
 * all of them passed the count and a team kept 59.
 */
test('creates sent together never leave a team past its limit; each 201 is kept and each 409 leaves nothing', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-'));
  const db = await openDatabase({ driver: 'sqlite', path: join(dir, 'm.sqlite') });
  try {
    await migrate(db.kysely, db.driver, migrations);
    const repo = new WebhookRepo(db.kysely);
    const count = repo.count.bind(repo);
    repo.count = async (teamId) => { const n = await count(teamId); await new Promise((r) => setTimeout(r, 30)); return n; };
    const service = new WebhookService({ repo, targets: { check: async () => {} } as unknown as WebhookTargets, vault: { seal: (p) => p, open: (s) => s } });
    const hook = (name: string) => ({ name, url: 'https://hooks.example/x', enabled: true, events: ['sandbox.lifecycle.created' as SandboxEventType], signatureSecret: 's' });
    for (let i = 0; i < EVENT_LIMITS.webhooksPerTeam - 3; i++) await service.create('team', hook(`h${i}`));
    const tried = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => service.create('team', hook(`together-${i}`))));
    for (const r of tried) if (r.status === 'rejected') assert.equal((r.reason as { status: number }).status, 409);
    const kept = await service.list('team');
    assert.ok(kept.length <= EVENT_LIMITS.webhooksPerTeam, `${kept.length} webhooks kept`);
    assert.equal(kept.length, EVENT_LIMITS.webhooksPerTeam - 3 + tried.filter((r) => r.status === 'fulfilled').length);
    assert.equal((await service.create('other-team', hook('theirs'))).teamID, 'other-team', 'another team counts its own');
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
