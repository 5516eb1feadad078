/** What keeps the build tables bounded: superseded requests, the team's cap on waiting builds, retention and the paged sweep. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger, type SvcError } from '@svc/common';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { BUILD_RETENTION_MS, pruneFinished, WAITING_LIMIT_MS } from './build-sweeps.ts';
import { BuildRepo } from './repo.ts';
import { BuildService, MAX_WAITING_BUILDS } from './service.ts';
import type { BuildRow } from './tables.ts';
import { fakes } from './testing/fake-ports.ts';

const DAY = 24 * 3600_000;

for (const tdb of availableTestDatabases()) {
  test(`template build rows stay bounded on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const db = await openDatabase(made.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const f = fakes();
      const repo = new BuildRepo(db.kysely);
      const builds = new BuildService({ repo, ...f.ports, logger: silentLogger() });
      const statusOf = (p: Promise<unknown>) => p.then(() => 200, (e: SvcError) => e.status);
      const row = (over: Partial<BuildRow> & { build_id: string; template_id: string }): BuildRow => ({
        status: 'waiting', cpu_count: 1, memory_mb: 256, spec: null, reason: null, snapshot_id: null, tags: '[]', team_id: 'team-r',
        created_at: Date.now(), updated_at: Date.now(), finished_at: null, ...over,
      });

      await t.test('a request again for the same tags fails the earlier one not started (E2B\'s "superseded"); other tags wait beside it', async () => {
        const first = await builds.request({ name: 'again' }, 'team-s');
        const second = await builds.request({ name: 'again' }, 'team-s');
        const v2 = await builds.request({ name: 'again:v2' }, 'team-s');
        assert.equal(first.templateID, second.templateID);
        const old = (await builds.status(first.templateID, first.buildID, {}))!;
        assert.equal(old.status, 'error');
        assert.equal(old.reason?.message, 'The build was canceled because it was superseded by a newer one.');
        assert.equal((await builds.status(second.templateID, second.buildID, {}))!.status, 'waiting');
        assert.equal((await builds.status(v2.templateID, v2.buildID, {}))!.status, 'waiting', 'another tag is another build');
        assert.equal(f.templates.get(first.templateID)!.failed, undefined, 'the template is not failed: a newer build is coming');
        const start = await builds.start('again', first.buildID, { fromTemplate: 'base' }).then(() => undefined, (e: SvcError) => e);
        assert.equal(start?.status, 409);
        assert.match(start!.message, /superseded by a newer one/);
        assert.equal(await repo.countWaiting('team-s'), 2);
      });

      await t.test(`a team holds at most ${MAX_WAITING_BUILDS} builds requested and not started: 429 past it`, async () => {
        for (let i = 0; i < MAX_WAITING_BUILDS; i++) await builds.request({ name: `capped-${i}` }, 'team-c');
        const over = await builds.request({ name: 'capped-more' }, 'team-c').then(() => undefined, (e: SvcError) => e);
        assert.equal(over?.status, 429);
        assert.match(over!.message, /20 template builds requested and not started/);
        assert.equal(await statusOf(builds.request({ name: 'capped-0' }, 'team-c')), 200, 'asking again for one of them replaces it');
        assert.equal(await statusOf(builds.request({ name: 'elsewhere' }, 'team-other')), 200, 'another team is not held back');
      });

      await t.test('the abandoned sweep goes through every page of builds past their limit', async () => {
        const old = Date.now() - WAITING_LIMIT_MS - 60_000;
        const ids = Array.from({ length: 450 }, (_, i) => `paged-${String(i).padStart(4, '0')}`);
        f.templates.set('tpl-paged', { row: { template_id: 'tpl-paged' } as never });
        for (const id of ids) await repo.insert(row({ build_id: id, template_id: 'tpl-paged', created_at: old, updated_at: old }));
        await repo.insert(row({ build_id: 'paged-recent', template_id: 'tpl-paged' }));
        const failed = await builds.failAbandoned();
        assert.deepEqual(failed.filter((id) => id.startsWith('paged-')).sort(), ids);
        assert.equal((await repo.get('paged-recent'))!.status, 'waiting');
      });

      await t.test('past retention: old builds lose their logs and failed ones their rows; a template\'s latest, a tagged, captured or built one keeps its row', async () => {
        const long = Date.now() - BUILD_RETENTION_MS - DAY;
        const finished = (id: string, status: 'ready' | 'error', at: number, over: Partial<BuildRow> = {}) =>
          repo.insert(row({ build_id: id, template_id: 'tpl-kept', status, created_at: at, updated_at: at, finished_at: at, ...over }));
        await finished('r-failed', 'error', long - 5);
        await finished('r-built', 'ready', long - 4, { snapshot_id: 'snap-built' });
        await finished('r-tagged', 'error', long - 3);
        await finished('r-captured', 'error', long - 2);
        await finished('r-recent', 'error', long - 1, { finished_at: Date.now() - DAY });
        await finished('r-latest', 'error', long);
        await db.kysely.insertInto('t_svc_template_tag').values({ template_id: 'tpl-kept', tag: 'old', build_id: 'r-tagged', created_at: long }).execute();
        await db.kysely.insertInto('t_svc_snapshot').values({
          snapshot_id: 'snap-step', name: null, sandbox_id: 'sb-1', template_id: 'base', artifact_id: 'art', layer_id: 'l', layer_sha256: 'x',
          size_bytes: 1, node_id: 'n1', status: 'ready', purpose: 'build', cache_key: 'k', build_id: 'r-captured', volume_mounts: null, contents: 'filesystem',
          cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, env_vars: '{}', team_id: 'team-r', created_at: long,
        }).execute();
        const ids = ['r-failed', 'r-built', 'r-tagged', 'r-captured', 'r-recent', 'r-latest'];
        for (const id of ids) await repo.appendLog(id, 0, { at: long, level: 'info', message: `log of ${id}` });
        const out = await builds.pruneFinished();
        assert.deepEqual(out, { logsOf: 4, rows: 1 });
        const rows = new Set((await repo.forTemplate('tpl-kept')).map((b) => b.build_id));
        assert.deepEqual(ids.filter((id) => !rows.has(id)), ['r-failed']);
        const logged = [];
        for (const id of ids) if ((await repo.logs(id, 0, 10)).length) logged.push(id);
        assert.deepEqual(logged, ['r-recent', 'r-latest']);
        assert.deepEqual(await builds.pruneFinished(), { logsOf: 3, rows: 0 }, 'what stays is read again, and nothing more goes');
      });

      // Kept rows stay at the head of the finished_at order: the sweep used to start over after
      // each page and stop at a page with nothing removable, so past a page of them no later log
      // went. It pages on after the last row read, ties on finished_at broken by build_id.
      await t.test('past more than a page of kept rows, the later builds\' logs and failed rows still go', async () => {
        const long = Date.now() - BUILD_RETENTION_MS - DAY;
        const finished = (id: string, status: 'ready' | 'error', at: number) =>
          repo.insert(row({ build_id: id, template_id: 'tpl-pages', status, created_at: at, updated_at: at, finished_at: at }));
        // seven superseded ready builds (kept rows), two pairs finishing in the same ms across page bounds
        const kept = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
        const keptAt = [long - 100, long - 99, long - 98, long - 98, long - 97, long - 96, long - 96];
        for (const [i, id] of kept.entries()) await finished(id, 'ready', keptAt[i]);
        await finished('p-failed-a', 'error', long - 50);
        await finished('p-ready', 'ready', long - 40);
        await finished('p-failed-b', 'error', long - 30);
        await finished('p-latest', 'ready', long);
        const ids = [...kept, 'p-failed-a', 'p-ready', 'p-failed-b', 'p-latest'];
        for (const id of ids) await repo.appendLog(id, 0, { at: long, level: 'info', message: `log of ${id}` });

        const out = await pruneFinished({ repo, templates: f.ports.templates, logger: silentLogger() }, Date.now(), 3);
        assert.ok(out.rows >= 2, `${out.rows} rows removed`);
        const rows = new Set((await repo.forTemplate('tpl-pages')).map((b) => b.build_id));
        assert.deepEqual(ids.filter((id) => !rows.has(id)), ['p-failed-a', 'p-failed-b']);
        const logged = [];
        for (const id of ids) if ((await repo.logs(id, 0, 10)).length) logged.push(id);
        assert.deepEqual(logged, ['p-latest'], 'every build past retention but the template\'s latest lost its log');
      });
    } finally {
      await db.close();
      await made.drop();
    }
  });
}
