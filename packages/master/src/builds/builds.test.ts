import { DEFAULT_TEAM_ID, NO_LIMITS } from '@svc/contracts/teams';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryCoordination, silentLogger, type SvcError } from '@svc/common';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { LOG_ENTRY_MAX } from './build-log.ts';
import { BuildRepo } from './repo.ts';
import { TeamBuilds } from './team-builds.ts';
import { BuildService } from './service.ts';
import { fakes } from './testing/fake-ports.ts';

// The builder's own logic on every database: the steps it runs and in what state, its log and
// status, the cache, failures and bad input. The template rows, sandboxes, snapshots and node
// stand in as small fakes of its ports; test/e2e/e2b-sdk/templates.ts runs it through the
// official SDK on real sandboxes.

for (const tdb of availableTestDatabases()) {
  test(`template builds on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const db = await openDatabase(made.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const f = fakes();
      const builds = new BuildService({ repo: new BuildRepo(db.kysely), ...f.ports, logger: silentLogger() });
      const statusOf = (p: Promise<unknown>) => p.then(() => 200, (e: SvcError) => e.status);
      const steps = [
        { type: 'ENV' as const, args: ['A', '1', 'B', 'two'] },
        { type: 'RUN' as const, args: ['make all'] },
        { type: 'WORKDIR' as const, args: ['app'] },
        { type: 'USER' as const, args: ['user'] },
        { type: 'RUN' as const, args: ['id -un'] },
        { type: 'RUN' as const, args: ['whoami', 'root'] },
      ];

      await t.test('a build runs its steps in order in a sandbox of the base, captures it and is ready; its log and status page through', async () => {
        const r = await builds.request({ name: 'app:v1', cpuCount: 2, memoryMB: 512 });
        assert.deepEqual({ ...r, buildID: '' }, { templateID: r.templateID, buildID: '', names: ['app'], aliases: ['app'], tags: ['v1'], public: false });
        assert.equal((await builds.status(r.templateID, r.buildID, {}))!.status, 'waiting');
        await builds.start('app', r.buildID, { fromTemplate: 'base', steps });
        await builds.settled();
        const env = { FROM_BASE: '1', A: '1', B: 'two' };
        assert.deepEqual(f.execs.map((e) => [e.command.split(';')[0], e.user, e.cwd, e.envVars]), [
          ['make all', 'user', undefined, env],
          ['set -- \'/home/user/app\' \'user:\'', 'root', '/', env],
          ['set -- \'user\'', 'root', '/', env],
          ['id -un', 'user', '/home/user/app', env],
          ['whoami', 'root', '/home/user/app', env],
        ], 'steps run as E2B\'s default user in its home until USER and WORKDIR say otherwise (a relative WORKDIR under that home, made and owned by the user), with the base\'s environment and the ENV steps\'');
        assert.match(f.execs[1]!.command, /mkdir -p "\$1" && chown -R "\$2" "\$first"/);
        assert.match(f.execs[2]!.command, /useradd --create-home --shell \/bin\/bash "\$1"/, 'USER makes a user the image lacks');
        assert.deepEqual(f.captures.map((c) => c.envVars), [env, env, env], 'a capture after each RUN, the last one the build\'s: the base\'s environment under the steps\'');
        assert.deepEqual(f.captures.map((c) => c.buildId), [r.buildID, r.buildID, r.buildID]);
        assert.equal(f.killed.length, 1, 'the build sandbox is killed');
        assert.equal(f.templates.get(r.templateID)!.built, 'snap-5');
        const all = await builds.status(r.templateID, r.buildID, {});
        assert.equal(all!.status, 'ready');
        assert.ok(all!.logEntries.some((e) => e.message === '[2/6] RUN make all'));
        assert.ok(all!.logEntries.some((e) => e.message === 'ran make all' && e.level === 'info'));
        const rest = await builds.status(r.templateID, r.buildID, { logsOffset: 3, limit: 2 });
        assert.deepEqual(rest!.logEntries, all!.logEntries.slice(3, 5));
        assert.ok((await builds.status(r.templateID, r.buildID, { level: 'warn' }))!.logEntries.length === 0);
        assert.equal(await builds.status('tpl-other', r.buildID, {}), undefined, 'a build of another template is not this one\'s');
        const byTime = (await builds.logs('app', r.buildID, {})).logs;
        assert.deepEqual(byTime.map((e) => e.message), all!.logEntries.map((e) => e.message), 'the logs route, oldest first');
        assert.deepEqual((await builds.logs('app', r.buildID, { direction: 'backward', limit: 1 })).logs.map((e) => e.message), ['Build finished']);
        assert.deepEqual((await builds.logs('app', r.buildID, { cursor: Date.now() + 60_000 })).logs, []);
        assert.equal(await statusOf(builds.logs('tpl-other', r.buildID, {})), 404);
      });

      await t.test('tags: a ready build gets default and the tags it asked for; assign moves tags to a build, remove drops them; bad input', async () => {
        const [app] = [...f.templates.values()].filter((x) => x.row.alias === 'app').map((x) => x.row.template_id);
        const first = (await builds.tags(app)).map((x) => [x.tag, x.buildID]);
        assert.deepEqual(first.map(([tag]) => tag), ['default', 'v1']);
        const buildId = first[0][1];
        assert.equal(await builds.snapshotOfTag(app, 'v1'), f.templates.get(app)!.built);
        assert.deepEqual(await builds.assignTags('app:v1', ['prod', 'stable', 'prod']), { buildID: buildId, tags: ['prod', 'stable'] });
        assert.deepEqual(await builds.assignTags('app', ['latest']), { buildID: buildId, tags: ['latest'] }, 'a bare name is its default tag');
        await builds.removeTags('app', ['stable', 'never-was']);
        assert.deepEqual((await builds.tags('app')).map((x) => x.tag), ['default', 'latest', 'prod', 'v1']);
        assert.equal(await statusOf(builds.assignTags('app:nope', ['x'])), 404);
        assert.equal(await statusOf(builds.assignTags('nothing:v1', ['x'])), 404);
        for (const bad of [['has space'], [':'], []]) assert.equal(await statusOf(builds.assignTags('app:v1', bad)), 400, JSON.stringify(bad));
        assert.equal(await statusOf(builds.assignTags('a:b:c', ['x'])), 400);
        assert.equal(await statusOf(builds.removeTags('app', ['default'])), 400);
        assert.equal(await statusOf(builds.removeTags('nothing', ['x'])), 404);
        assert.equal(await statusOf(builds.request({ name: 'app', tags: ['bad tag'] })), 400);
      });

      await t.test('tags are exact on every engine: Prod, prod and Default are tags of their own; removing DEFAULT leaves default', async () => {
        const r = await builds.request({ name: 'cased:Prod', tags: ['prod', 'Default'] });
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: ['make cased'] }] });
        await builds.settled();
        assert.equal((await builds.status(r.templateID, r.buildID, {}))!.status, 'ready');
        assert.equal(f.templates.get(r.templateID)!.failed, undefined, 'its template is built, not failed (MySQL: the tags hit a duplicate key after the build was ready)');
        const tags = async () => (await builds.tags('cased')).map((x) => x.tag);
        assert.deepEqual(await tags(), ['Default', 'Prod', 'default', 'prod'], 'in the same order on every engine');
        await builds.removeTags('cased', ['DEFAULT', 'PROD']);
        assert.deepEqual(await tags(), ['Default', 'Prod', 'default', 'prod'], 'no such tags: nothing removed (MySQL removed default and prod)');
        await builds.removeTags('cased', ['Default', 'Prod']);
        assert.deepEqual(await tags(), ['default', 'prod']);
        assert.equal(await builds.snapshotOfTag(r.templateID, 'default'), f.templates.get(r.templateID)!.built);
        assert.equal(await builds.snapshotOfTag(r.templateID, 'DEFAULT'), undefined);
        assert.equal(await statusOf(builds.assignTags('cased:PROD', ['x'])), 404);
        assert.deepEqual(await builds.assignTags('cased:prod', ['PROD']), { buildID: r.buildID, tags: ['PROD'] });
        assert.deepEqual(await tags(), ['PROD', 'default', 'prod']);
      });

      await t.test('a start request past 64 KiB (MySQL\'s text) is recorded and the build runs; its step\'s log entry is cut', async () => {
        const r = await builds.request({ name: 'long-spec' });
        const command = `echo ${'x'.repeat(70 * 1024)}`;
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: [command] }] });
        await builds.settled();
        const s = await builds.status(r.templateID, r.buildID, {});
        assert.equal(s!.status, 'ready', JSON.stringify(s!.reason));
        assert.ok(f.execs.some((e) => e.command.startsWith(command)), 'the step ran whole');
        const header = s!.logEntries.find((e) => e.message.startsWith('[1/1] RUN echo x'));
        assert.ok(header, 'the step\'s entry is there');
        assert.ok(header.message.length <= LOG_ENTRY_MAX + 40 && header.message.endsWith(`(${command.length + '[1/1] RUN '.length - LOG_ENTRY_MAX} more characters)`), header.message.slice(-60));
      });

      await t.test('the same base and steps again are cached: nothing runs; force runs them', async () => {
        const before = f.execs.length;
        const r = await builds.request({ name: 'app' });
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps });
        await builds.settled();
        assert.equal(f.execs.length, before);
        const s = await builds.status(r.templateID, r.buildID, {});
        assert.equal(s!.status, 'ready');
        assert.ok(s!.logEntries.some((e) => /cached/.test(e.message)));
        const forced = await builds.request({ name: 'app' });
        await builds.start(forced.templateID, forced.buildID, { fromTemplate: 'base', steps, force: true });
        await builds.settled();
        assert.deepEqual(f.execs.slice(before).map((e) => e.command.split(';')[0]), ['make all', 'set -- \'/home/user/app\' \'user:\'', 'set -- \'user\'', 'id -un', 'whoami']);
      });

      await t.test('the cache is the team\'s: another team writing the same base and steps runs them all (their files were made for the first team)', async () => {
        const before = f.execs.length;
        const r = await builds.request({ name: 'app-of-b' }, 'team-b');
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps });
        await builds.settled();
        assert.deepEqual(f.execs.slice(before).map((e) => e.command.split(';')[0]), ['make all', 'set -- \'/home/user/app\' \'user:\'', 'set -- \'user\'', 'id -un', 'whoami']);
        const s = await builds.status(r.templateID, r.buildID, {});
        assert.equal(s!.status, 'ready');
        assert.ok(!s!.logEntries.some((e) => /CACHED|cached/.test(e.message)), 'nothing of the other team\'s is reused');
        const again = await builds.request({ name: 'app-of-b' }, 'team-b');
        const mid = f.execs.length;
        await builds.start(again.templateID, again.buildID, { fromTemplate: 'base', steps });
        await builds.settled();
        assert.equal(f.execs.length, mid, 'the same team again: all cached');
      });

      await t.test('per step: a changed step resumes from the capture of the steps before it; a step\'s force runs it and those after; a start command adds its own capture', async () => {
        const changed = [...steps.slice(0, 5), { type: 'RUN' as const, args: ['whoami', 'user'] }];
        let before = f.execs.length;
        const r = await builds.request({ name: 'app' });
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps: changed });
        await builds.settled();
        assert.deepEqual(f.execs.slice(before).map((e) => [e.command, e.user]), [['whoami', 'user']], 'only the changed last step runs');
        const sbx = f.execs.at(-1)!.sandboxId;
        assert.match(f.startedFrom.get(sbx) ?? '', /^snap-/, 'its sandbox starts from the capture of step 5');
        const s = await builds.status(r.templateID, r.buildID, {});
        assert.equal(s!.status, 'ready');
        assert.deepEqual(s!.logEntries.filter((e) => /^\[\d\/6\]/.test(e.message)).map((e) => e.message), [
          '[1/6] CACHED ENV A 1 B two', '[2/6] CACHED RUN make all', '[3/6] CACHED WORKDIR app', '[4/6] CACHED USER user', '[5/6] CACHED RUN id -un', '[6/6] RUN whoami user',
        ]);

        // skipCache() before step 5: steps 1 to 4 are cached (the capture after RUN make all), then WORKDIR and USER run again.
        before = f.execs.length;
        const forcedFrom5 = changed.map((x, i) => (i === 4 ? { ...x, force: true } : x));
        const again = await builds.request({ name: 'app' });
        await builds.start(again.templateID, again.buildID, { fromTemplate: 'base', steps: forcedFrom5 });
        await builds.settled();
        assert.deepEqual(f.execs.slice(before).map((e) => e.command.split(';')[0]), ['set -- \'/home/user/app\' \'user:\'', 'set -- \'user\'', 'id -un', 'whoami']);

        // With a start command the build's capture follows it; the steps' captures are the same.
        before = f.execs.length;
        const started = await builds.request({ name: 'app' });
        await builds.start(started.templateID, started.buildID, { fromTemplate: 'base', steps: changed, startCmd: 'serve' });
        await builds.settled();
        assert.deepEqual(f.execs.slice(before).filter((e) => !e.command.includes('serve')).map((e) => e.command.split(';')[0]), [], 'no step runs again');
        assert.ok(f.execs.slice(before).some((e) => e.command.includes('serve')), 'the start command runs');
        assert.equal((await builds.status(started.templateID, started.buildID, {}))!.status, 'ready');
      });

      await t.test('a step\'s output is logged as it comes, a line an entry: the first thousand lines, then how many were left out and the last hundred', async () => {
        const r = await builds.request({ name: 'chatty' });
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['chatty'] }] });
        await builds.settled();
        const status = await builds.status(r.templateID, r.buildID, {});
        assert.equal(status!.status, 'ready');
        const entries: string[] = [];
        for (let offset = 0; ; offset += 100) {
          const page = (await builds.status(r.templateID, r.buildID, { logsOffset: offset }))!.logEntries;
          entries.push(...page.map((e) => e.message));
          if (page.length < 100) break;
        }
        assert.ok(entries.includes('ran chatty'), 'a line split over two chunks is one entry');
        assert.ok(entries.includes('line 999') && !entries.includes('line 1000') && !entries.includes('line 1400'), 'the first thousand lines: ran chatty, lines 1 to 999');
        assert.ok(entries.includes('… 401 line(s) of output not shown …'), entries.slice(1000, 1010).join('\n'));
        assert.ok(entries.includes('line 1401') && entries.includes('line 1500'));
      });

      await t.test('a step capture that fails only warns: the build goes on and ends ready', async () => {
        f.failStepCaptures(true);
        try {
          const r = await builds.request({ name: 'nocache' });
          await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps, force: true });
          await builds.settled();
          const s = await builds.status(r.templateID, r.buildID, {});
          assert.equal(s!.status, 'ready', JSON.stringify(s!.reason));
          assert.ok(s!.logEntries.some((e) => e.level === 'warn' && /step 2: its files could not be kept for the cache \(no room for it\)/.test(e.message)), JSON.stringify(s!.logEntries));
        } finally {
          f.failStepCaptures(false);
        }
      });

      await t.test('a failing step fails the build with its number, its exit code and its last output; the sandbox is killed', async () => {
        f.failCommand('make all', 2);
        const r = await builds.request({ name: 'broken' });
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps, force: true });
        await builds.settled();
        const s = await builds.status(r.templateID, r.buildID, {});
        assert.equal(s!.status, 'error');
        assert.deepEqual(s!.reason, { message: 'step 2 exited with code 2: it broke | ran make all', step: '2' });
        assert.ok(s!.logEntries.some((e) => e.level === 'warn' && e.message === 'it broke'));
        assert.match(f.templates.get(r.templateID)!.failed!, /step 2 exited/);
        assert.equal(f.killed.at(-1), f.execs.at(-1)!.sandboxId, 'the sandbox of the failed step is killed');
        f.failCommand('', 0);
      });

      await t.test('a start command runs at the end of the build as the last USER in the last WORKDIR, then its ready check; the template keeps both', async () => {
        const before = f.execs.length;
        const r = await builds.request({ name: 'server' });
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps: [{ type: 'USER', args: ['user'] }, { type: 'WORKDIR', args: ['/srv'] }], startCmd: 'serve --port 8000', readyCmd: 'check 8000' });
        await builds.settled();
        assert.equal((await builds.status(r.templateID, r.buildID, {}))!.status, 'ready');
        const ran = f.execs.slice(before).filter((e) => e.command.includes('serve') || e.command.startsWith('check'));
        assert.deepEqual(ran.map((e) => [e.command, e.user, e.cwd]), [
          ['out=/proc/1/fd/1; [ -w "$out" ] || out=/dev/console; nohup /bin/sh -c \'serve --port 8000\' </dev/null >"$out" 2>&1 &', 'user', '/srv'],
          ['check 8000', 'user', '/srv'],
        ]);
        assert.ok(f.templates.get(r.templateID)!.built);
      });

      await t.test('COPY: the files route says whether the files are stored; the step feeds the archive to tar as root, then moves the source with its owner and mode', async () => {
        const r = await builds.request({ name: 'copier' });
        const hash = 'e'.repeat(64);
        assert.deepEqual(await builds.filesLink('copier', hash, 'http://api.test'), { present: false, url: `http://api.test/templates/files/${hash}?signed` });
        assert.equal(await statusOf(builds.filesLink('nothing', hash, 'http://api.test')), 404);
        f.uploaded.add(hash);
        assert.deepEqual(await builds.filesLink(r.templateID, hash, 'http://api.test'), { present: true });
        f.execs.length = 0;
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'base', steps: [
          { type: 'USER' as const, args: ['user'] },
          { type: 'COPY' as const, args: ['src/*.js', 'app/', '', '0644'], filesHash: hash },
          { type: 'COPY' as const, args: ['conf.json', '/etc/app.json', 'root'], filesHash: hash, gzip: false },
        ] });
        await builds.settled();
        assert.equal((await builds.status(r.templateID, r.buildID, {}))!.status, 'ready');
        const [, unpack, move, unpack2, move2] = f.execs; // the first makes sure the USER exists
        assert.equal(unpack.user, 'root');
        assert.deepEqual(unpack.stdin, { url: `/internal/v1/template-files/${DEFAULT_TEAM_ID}/${hash}`, sha256: 'c'.repeat(64), sizeBytes: 10 });
        assert.match(unpack.command, /tar -xzf - -C "\$1"$/);
        assert.match(unpack2.command, /tar -xf - -C "\$1"$/, 'an archive sent without gzip is read as it is');
        assert.match(move.command, /^set -- '\/tmp\/\.svc-copy-2-e{16}\/src' 'app\/' 'user:' '0644' '\/tmp\/\.svc-copy-2-e{16}'; /, 'the source up to its glob, the owner the step\'s user');
        assert.equal(move.user, 'root');
        assert.equal(move.cwd, '/home/user', 'as root, but in the user\'s home: a relative destination lands there');
        assert.match(move2.command, /^set -- '\/tmp\/\.svc-copy-3-e{16}\/conf\.json' '\/etc\/app\.json' 'root:' '' /);
        f.uploaded.delete(hash);
        const again = await builds.request({ name: 'copier' });
        assert.equal(await statusOf(builds.start(again.templateID, again.buildID, { fromTemplate: 'base', steps: [{ type: 'COPY' as const, args: ['x', 'y'], filesHash: hash }] })), 400, 'files never uploaded');
        await builds.start(again.templateID, again.buildID, { fromTemplate: 'base' });
        await builds.settled();
      });

      await t.test('fromImage: the build waits for a template of the image (made once, with the credentials given), then runs on it; an image that fails fails the build at base', async () => {
        const r = await builds.request({ name: 'on-image' });
        await builds.start(r.templateID, r.buildID, { fromImage: 'registry.test/app:1', fromImageRegistry: { type: 'registry', username: 'me', password: 'pw' }, steps: [{ type: 'RUN' as const, args: ['echo on image'] }] });
        await new Promise((res) => setTimeout(res, 300));
        assert.equal((await builds.status(r.templateID, r.buildID, {}))!.status, 'building', 'waiting for the image');
        const img = f.images.get('registry.test/app:1')!;
        assert.deepEqual(img.auth, { username: 'me', password: 'pw' });
        img.status = 'ready';
        await builds.settled();
        const s = await builds.status(r.templateID, r.buildID, {});
        assert.equal(s!.status, 'ready', JSON.stringify(s));
        assert.ok(s!.logEntries.some((e) => e.message === `Base image registry.test/app:1 is template ${img.id}`));

        const again = await builds.request({ name: 'on-image-2' });
        await builds.start(again.templateID, again.buildID, { fromImage: 'registry.test/app:1', fromImageRegistry: { type: 'gcp', serviceAccountJson: '{"k":1}' } });
        await builds.settled();
        assert.equal((await builds.status(again.templateID, again.buildID, {}))!.status, 'ready', 'the same image again: its template is reused');
        assert.equal(f.images.size, 1);

        const broken = await builds.request({ name: 'on-broken-image' });
        f.images.set('registry.test/broken:1', { id: 'tpl-img-broken', status: 'failed', error: 'manifest unknown' });
        await builds.start(broken.templateID, broken.buildID, { fromImage: 'registry.test/broken:1' });
        await builds.settled();
        const bs = await builds.status(broken.templateID, broken.buildID, {});
        assert.equal(bs!.status, 'error');
        assert.deepEqual(bs!.reason, { message: 'the image registry.test/broken:1 could not be made a template: manifest unknown', step: 'base' });
      });

      await t.test('a master runs as many builds at once as it may; the next waits its turn, saying so; a build past its limit fails', async () => {
        const one = new BuildService({ repo: new BuildRepo(db.kysely), ...f.ports, logger: silentLogger(), maxConcurrent: 1, timeoutMs: 60_000 });
        let release!: () => void;
        f.held.set('hold on', new Promise((r) => { release = r; }));
        const a = await one.request({ name: 'slot-a' });
        const b = await one.request({ name: 'slot-b' });
        await one.start(a.templateID, a.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: ['hold on'] }] });
        // Polled, not slept for: a loaded machine takes its time to reach the held step.
        await until(() => f.execs.some((e) => e.command === 'hold on'), 'the first build runs its held step');
        await one.start(b.templateID, b.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: ['echo second'] }] });
        const isQueued = async () => (await one.status(b.templateID, b.buildID, {}))!.logEntries.some((e) => /^Queued: 1 build\(s\) running/.test(e.message));
        await untilAsync(isQueued, 'the second build says it is queued');
        const queued = await one.status(b.templateID, b.buildID, {});
        assert.equal(queued!.status, 'building');
        assert.ok(queued!.logEntries.some((e) => /^Queued: 1 build\(s\) running/.test(e.message)), JSON.stringify(queued!.logEntries));
        assert.ok(!f.execs.some((e) => e.command === 'echo second'), 'the second waits for the first');
        release();
        await one.settled();
        for (const r of [a, b]) assert.equal((await one.status(r.templateID, r.buildID, {}))!.status, 'ready');
        f.held.delete('hold on');

        const slow = new BuildService({ repo: new BuildRepo(db.kysely), ...f.ports, logger: silentLogger(), timeoutMs: 100 });
        f.held.set('takes a while', new Promise((r) => setTimeout(r, 300)));
        const c = await slow.request({ name: 'too-slow' });
        await slow.start(c.templateID, c.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: ['takes a while'] }, { type: 'RUN' as const, args: ['never runs'] }] });
        await slow.settled();
        const late = await slow.status(c.templateID, c.buildID, {});
        assert.equal(late!.status, 'error');
        assert.match(late!.reason!.message, /ran past its limit of 0 minutes before step 2/);
        assert.ok(!f.execs.some((e) => e.command === 'never runs'));
        f.held.delete('takes a while');
      });

      await t.test('a template deleted during its build ends the build: its sandbox is killed, its slot freed, and a queued one never starts', async () => {
        const one = new BuildService({ repo: new BuildRepo(db.kysely), ...f.ports, logger: silentLogger(), maxConcurrent: 1, templateCheckMs: 20 });
        let release!: () => void;
        f.held.set('long step', new Promise((r) => { release = r; }));
        const a = await one.request({ name: 'deleted-mid-build' });
        const b = await one.request({ name: 'deleted-while-queued' });
        await one.start(a.templateID, a.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: ['long step'] }, { type: 'RUN' as const, args: ['after the delete'] }] });
        await until(() => f.execs.some((e) => e.command === 'long step'), 'the build runs its long step');
        const sandboxId = f.execs.find((e) => e.command === 'long step')!.sandboxId;
        await one.start(b.templateID, b.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: ['queued step'] }] });
        f.templates.delete(a.templateID);
        f.templates.delete(b.templateID);
        await until(() => f.killed.includes(sandboxId), 'the deleted template\'s build sandbox is killed while its step runs');
        release();
        await one.settled();
        for (const r of [a, b]) {
          const s = await one.status(r.templateID, r.buildID, {});
          assert.equal(s!.status, 'error');
          assert.match(s!.reason!.message, /was deleted during the build/);
        }
        assert.ok(!f.execs.some((e) => e.command === 'after the delete' || e.command === 'queued step'), 'no step runs for a deleted template');
        f.held.delete('long step');
      });

      await t.test('a team\'s limits: a build bigger than its maxVcpus or maxMemoryMB is a 429; builds started together pass maxConcurrentBuilds one at a time', async () => {
        const team = 'team-limited';
        const limits = { ...NO_LIMITS, maxConcurrentBuilds: 1, maxVcpus: 2, maxMemoryMB: 1024 };
        const limited = new BuildService({ repo: new BuildRepo(db.kysely), ...f.ports, logger: silentLogger(), quotas: { limits: async () => limits }, teamBuilds: new TeamBuilds({ db: db.kysely, quotas: { limits: async () => limits }, coordination: new MemoryCoordination() }) });
        for (const [size, key] of [[{ cpuCount: 64, memoryMB: 512 }, 'maxVcpus'], [{ cpuCount: 1, memoryMB: 1_048_576 }, 'maxMemoryMB']] as const) {
          const big = await limited.request({ name: `big-${key.toLowerCase()}`, ...size }, team);
          await assert.rejects(limited.start(big.templateID, big.buildID, { fromTemplate: 'base', steps: [] }),
            (e: SvcError) => e.status === 429 && new RegExp(`^team quota ${key}: `).test(e.message));
          assert.equal((await limited.status(big.templateID, big.buildID, {}))!.status, 'waiting', 'a refused build stays waiting');
        }
        let release!: () => void;
        f.held.set('hold the slot', new Promise((r) => { release = r; }));
        const made = await Promise.all(['race-a', 'race-b', 'race-c', 'race-d'].map((name) => limited.request({ name, cpuCount: 1, memoryMB: 512 }, team)));
        const outcomes = await Promise.allSettled(made.map((m) => limited.start(m.templateID, m.buildID, { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: ['hold the slot'] }] })));
        assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 1, JSON.stringify(outcomes.map((o) => o.status === 'rejected' ? (o.reason as SvcError).message : 'started')));
        for (const o of outcomes) if (o.status === 'rejected') assert.equal((o.reason as SvcError).status, 429);
        release();
        await limited.settled();
        f.held.delete('hold the slot');
        // The refused builds stay waiting: gone, so that the sweep's test below sees only its own.
        const refused = (await db.kysely.selectFrom('t_svc_build').select('build_id').where('status', '=', 'waiting').execute()).map((r) => r.build_id);
        if (refused.length) await db.kysely.deleteFrom('t_svc_build').where('build_id', 'in', refused).execute();
      });

      await t.test('an unknown base fails the build at step base', async () => {
        const r = await builds.request({ name: 'orphan' });
        await builds.start(r.templateID, r.buildID, { fromTemplate: 'nothing-here', steps: [] });
        await builds.settled();
        assert.equal((await builds.status(r.templateID, r.buildID, {}))!.reason?.step, 'base');
      });

      await t.test('bad input: names, bases, steps; a second start is 409, an unknown build 404', async () => {
        for (const name of ['a:b:c', 'x:']) assert.equal(await statusOf(builds.request({ name })), 400, name);
        assert.equal(await statusOf(builds.request({})), 400);
        const r = await builds.request({ name: 'checked' });
        const bad = [
          {}, { fromTemplate: 'base', fromImage: 'e2bdev/base' },
          { fromImage: 'ubuntu:22.04', fromImageRegistry: { type: 'aws', awsAccessKeyId: 'a', awsSecretAccessKey: 'b', awsRegion: 'c' } },
          { fromImage: 'ubuntu:22.04', fromImageRegistry: { type: 'registry', username: 'u' } },
          { fromImage: 'ubuntu:22.04', fromImageRegistry: { type: 'gcp' } },
          { fromImage: 'ubuntu:22.04', fromImageRegistry: { type: 'other' } },
          { fromTemplate: 'base', steps: [{ type: 'COPY' as const, args: ['a', 'b'] }] },
          { fromTemplate: 'base', steps: [{ type: 'COPY' as const, args: ['a', 'b'], filesHash: 'f'.repeat(64) }] },
          { fromTemplate: 'base', steps: [{ type: 'COPY' as const, args: ['/etc/passwd', 'b'], filesHash: 'e'.repeat(64) }] },
          { fromTemplate: 'base', steps: [{ type: 'COPY' as const, args: ['../up', 'b'], filesHash: 'e'.repeat(64) }] },
          { fromTemplate: 'base', steps: [{ type: 'COPY' as const, args: ['a', 'b', 'user', '999'], filesHash: 'e'.repeat(64) }] },
          { fromTemplate: 'base', steps: [{ type: 'COPY' as const, args: ['a', 'b', 'bad owner'], filesHash: 'e'.repeat(64) }] },
          { fromTemplate: 'base', steps: [{ type: 'COPY' as const, args: ['a', ''], filesHash: 'e'.repeat(64) }] },
          { fromTemplate: 'base', steps: [{ type: 'RUN' as const, args: [' '] }] },
          { fromTemplate: 'base', steps: [{ type: 'ENV' as const, args: ['ODD'] }] },
          { fromTemplate: 'base', steps: [{ type: 'ENV' as const, args: ['1BAD', 'x'] }] },
          { fromTemplate: 'base', steps: [{ type: 'USER' as const, args: ['no body'] }] },
          { fromTemplate: 'base', steps: [{ type: 'WORKDIR' as const, args: [] }] },
        ];
        for (const spec of bad) assert.equal(await statusOf(builds.start(r.templateID, r.buildID, spec)), 400, JSON.stringify(spec));
        assert.equal((await builds.status(r.templateID, r.buildID, {}))!.status, 'waiting', 'refused input leaves the build waiting');
        await builds.start(r.templateID, r.buildID, { fromImage: 'e2bdev/base:latest' });
        assert.equal(await statusOf(builds.start(r.templateID, r.buildID, { fromTemplate: 'base' })), 409);
        assert.equal(await statusOf(builds.start(r.templateID, 'no-such-build', { fromTemplate: 'base' })), 404);
        assert.equal(await statusOf(builds.start('tpl-elsewhere', r.buildID, { fromTemplate: 'base' })), 404);
        await builds.settled();
      });

      await t.test('the sweep fails builds nothing runs any more: silent past a step\'s limit, or requested and never started for a day', async () => {
        const waiting = await builds.request({ name: 'never-started' });
        const building = await builds.request({ name: 'interrupted' });
        await db.kysely.updateTable('t_svc_build').set({ status: 'building' }).where('build_id', '=', building.buildID).execute();
        assert.deepEqual(await builds.failAbandoned(Date.now() + 60_000), [], 'recent builds are left alone, whichever master runs them');
        assert.deepEqual((await builds.failAbandoned(Date.now() + 31 * 60_000)).sort(), [building.buildID]);
        assert.match((await builds.status(building.templateID, building.buildID, {}))!.reason!.message, /master went away/);
        assert.deepEqual(await builds.failAbandoned(Date.now() + 25 * 3600_000), [waiting.buildID]);
        assert.match(f.templates.get(waiting.templateID)!.failed!, /never started/);
      });
    } finally {
      await db.close();
      await made.drop();
    }
  });
}

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  await untilAsync(async () => cond(), what, ms);
}

async function untilAsync(cond: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) assert.fail(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
