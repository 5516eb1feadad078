import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { test } from 'node:test';
import { createHttpApp, silentLogger } from '@svc/common';
import type { TemplateCenterClient } from '@svc/contracts/template-center';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases, type TestDatabase } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { BuildFileRepo } from './build-file-repo.ts';
import { ContextFiles } from './context-files.ts';

/**
 * Context files (E2B's COPY) are each team's (context-files.ts): one team's upload of a files hash
 * is neither present for another team nor copied by its builds, and an upload URL is good only
 * for the team it was made for. The store is the template center's contract in memory, keeping
 * an id's first upload as the real one does.
 */
const HASH = 'a'.repeat(64);
const TEAM_A = '11111111-1111-4111-8111-111111111111';
const TEAM_B = '22222222-2222-4222-8222-222222222222';

function memoryStore() {
  const files = new Map<string, Buffer>();
  const info = (id: string) => {
    const data = files.get(id);
    return data && { artifactId: id, sha256: createHash('sha256').update(data).digest('hex'), sizeBytes: data.length };
  };
  const deleted: string[] = [];
  let failDeletes = false;
  const client = {
    async artifactInfo(id: string) { return info(id); },
    async deleteArtifact(id: string) {
      if (failDeletes) throw new Error('template center unreachable');
      deleted.push(id);
      return { deleted: files.delete(id) };
    },
    async putLayer(id: string, _meta: unknown, body: Readable) {
      const chunks: Buffer[] = [];
      for await (const c of body) chunks.push(c as Buffer);
      if (!files.has(id)) files.set(id, Buffer.concat(chunks));
      return info(id)!;
    },
    async download(id: string) {
      const data = files.get(id);
      return data ? new Response(data, { status: 200 }) : new Response('{"code":404,"message":"no such artifact"}', { status: 404 });
    },
  };
  return { files, deleted, failDeletes: (on: boolean) => { failDeletes = on; }, client: client as unknown as TemplateCenterClient };
}

/** A migrated database of the engine, and its build files repo. */
async function recordsOn(tdb: TestDatabase) {
  const db = await openDatabase(tdb.config);
  await migrate(db.kysely, db.driver, migrations);
  return { repo: new BuildFileRepo(db.kysely), close: async () => { await db.close(); await tdb.drop(); } };
}

test('a team\'s uploaded files are its own: present, copied and downloaded for it alone; an upload URL is good only for its team', async (t) => {
  const store = memoryStore();
  const records = await recordsOn(await availableTestDatabases()[0].create!());
  t.after(records.close);
  const files = new ContextFiles({ templateCenter: store.client, masterAddr: 'http://master', signingKey: 'k', logger: silentLogger(), records: records.repo, teamMaxBytes: 1 << 30 });
  const app = createHttpApp({ logger: silentLogger() });
  await files.registerRoutes(app);
  await app.ready();
  try {
    // B learns the hash of A's files (a public repository's template) and uploads first.
    const linkB = await files.uploadLink(HASH, TEAM_B, 'http://api');
    assert.equal(linkB.present, false);
    const pathB = new URL(linkB.url!).pathname + new URL(linkB.url!).search;
    assert.match(pathB, new RegExp(`^/templates/files/${HASH}\\?team=${TEAM_B}&expires=\\d+&signature=[0-9a-f]{64}$`));
    const put = (url: string, body: string) => app.inject({ method: 'PUT', url, payload: body, headers: { 'content-type': 'application/octet-stream', 'content-length': String(body.length) } });
    assert.equal((await put(pathB, 'B\'s poisoned archive')).statusCode, 200);

    const linkA = await files.uploadLink(HASH, TEAM_A, 'http://api');
    assert.equal(linkA.present, false, 'A is asked to upload its own: B\'s is not present for A');
    assert.equal(await files.input(HASH, TEAM_A), undefined, 'nor would A\'s COPY read it');
    const pathA = new URL(linkA.url!).pathname + new URL(linkA.url!).search;
    // A's signature is for A: the same URL naming B is refused, so B cannot write into A's either.
    assert.equal((await put(pathA.replace(`team=${TEAM_A}`, `team=${TEAM_B}`), 'x')).statusCode, 401);
    assert.equal((await put(pathA.replace(`team=${TEAM_A}&`, ''), 'x')).statusCode, 401, 'no team: refused');
    assert.equal((await put(pathB.replace(`team=${TEAM_B}`, `team=${TEAM_A}`), 'x')).statusCode, 401, 'B\'s URL cannot be pointed at A');
    assert.equal((await put(pathA, 'A\'s archive')).statusCode, 200);

    const inputA = await files.input(HASH, TEAM_A);
    assert.equal(inputA!.url, `http://master/internal/v1/template-files/${TEAM_A}/${HASH}`);
    assert.equal(inputA!.sha256, createHash('sha256').update('A\'s archive').digest('hex'));
    assert.equal((await app.inject({ method: 'GET', url: `/internal/v1/template-files/${TEAM_A}/${HASH}` })).body, 'A\'s archive');
    assert.equal((await app.inject({ method: 'GET', url: `/internal/v1/template-files/${TEAM_B}/${HASH}` })).body, 'B\'s poisoned archive');
    assert.equal((await files.uploadLink(HASH, TEAM_A, 'http://api')).present, true);
    assert.equal((await app.inject({ method: 'GET', url: `/internal/v1/template-files/..%2f${TEAM_A}/${HASH}` })).statusCode, 400, 'a team that is not an id');
    assert.equal(store.files.size, 2, 'one archive of each team');
    for (const id of store.files.keys()) assert.match(id, /^ctx-[0-9a-f]{64}$/, 'an id the template center\'s routes take (at most 100 characters)');
  } finally {
    await app.close();
  }
});

test('a team stores at most master.build_files_team_max_mb of files: no link, and no upload, past it (429); its own upload of the same hash replaces itself; another team has its own room', async (t) => {
  const store = memoryStore();
  const records = await recordsOn(await availableTestDatabases()[0].create!());
  t.after(records.close);
  const files = new ContextFiles({ templateCenter: store.client, masterAddr: 'http://master', signingKey: 'k', logger: silentLogger(), records: records.repo, teamMaxBytes: 100 });
  const app = createHttpApp({ logger: silentLogger() });
  await files.registerRoutes(app);
  await app.ready();
  t.after(() => app.close());
  const hash = (n: number) => String(n).repeat(64).slice(0, 64);
  const upload = async (team: string, n: number, bytes: number) => {
    const link = await files.uploadLink(hash(n), team, 'http://api');
    const u = new URL(link.url!);
    return app.inject({ method: 'PUT', url: u.pathname + u.search, payload: 'x'.repeat(bytes), headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes) } });
  };
  assert.equal((await upload(TEAM_A, 1, 60)).statusCode, 200);
  const over = await upload(TEAM_A, 2, 50);
  assert.equal(over.statusCode, 429, over.body);
  assert.match(over.json<{ message: string }>().message, /^team quota master\.build_files_team_max_mb: the team's build files take 1 MiB of the 1 it may store, and this upload has 1 more/);
  assert.equal(store.files.size, 1, 'nothing of it was stored');
  assert.equal((await upload(TEAM_A, 2, 40)).statusCode, 200, 'what fits is taken');
  await assert.rejects(files.uploadLink(hash(3), TEAM_A, 'http://api'), (e: { status: number }) => e.status === 429, 'full: no more links');
  assert.equal((await upload(TEAM_B, 1, 90)).statusCode, 200, 'another team has its own room');
});

for (const tdb of availableTestDatabases()) {
  /**
   * The quota is counted before the body is read: ten uploads at once, each just under it, all
   * passed the check before this (none was stored yet) and the team held ten times its quota.
   * The store here holds each body a while, as a real upload takes its time.
   */
  test(`[${tdb.driver}] uploads at once are counted against the quota before their bodies are read: one fits, the rest are 429; a failed upload gives its room back`, { skip: tdb.skip }, async (t) => {
    const store = memoryStore();
    let failNext = false;
    const slowPut = store.client.putLayer.bind(store.client);
    store.client.putLayer = async (id, meta, body) => {
      await new Promise((r) => setTimeout(r, 50));
      if (failNext) { failNext = false; for await (const _ of body); throw new Error('the store failed'); }
      return slowPut(id, meta, body);
    };
    const records = await recordsOn(await tdb.create!());
    t.after(records.close);
    const MAX = 1000;
    const files = new ContextFiles({ templateCenter: store.client, masterAddr: 'http://master', signingKey: 'k', logger: silentLogger(), records: records.repo, teamMaxBytes: MAX });
    const app = createHttpApp({ logger: silentLogger() });
    await files.registerRoutes(app);
    await app.ready();
    t.after(() => app.close());
    const hash = (n: number) => createHash('sha256').update(String(n)).digest('hex');
    const link = async (n: number) => new URL((await files.uploadLink(hash(n), TEAM_A, 'http://api')).url!);
    const putTo = (u: URL, bytes: number) => app.inject({ method: 'PUT', url: u.pathname + u.search, payload: 'x'.repeat(bytes), headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes) } });
    const put = async (n: number, bytes: number) => putTo(await link(n), bytes);
    // The links first, while the team holds nothing; then the uploads, all at once.
    const links = await Promise.all(Array.from({ length: 10 }, (_, i) => link(i)));
    const answers = await Promise.all(links.map((u) => putTo(u, MAX - 1)));
    assert.deepEqual(answers.map((r) => r.statusCode).sort(), [200, ...Array(9).fill(429)]);
    assert.equal(store.files.size, 1);
    assert.equal(await records.repo.teamBytes(TEAM_A), MAX - 1, 'the stored one alone: no reservation is left');

    await files.sweep(7 * 86_400_000);
    assert.equal(store.files.size, 1, 'what a build may still use stays');
    // Room given back: a failed upload leaves none of it taken.
    const [first] = [...store.files.keys()];
    await store.client.deleteArtifact(first);
    await records.repo.forget(first);
    failNext = true;
    assert.equal((await put(20, MAX)).statusCode, 500);
    assert.equal(await records.repo.teamBytes(TEAM_A), 0);
    assert.equal((await put(21, MAX)).statusCode, 200);
    // A reservation whose master died mid-upload counts a day, then the sweep drops it.
    await records.repo.insert({ artifact_id: 'upl-of-a-master-that-died', team_id: TEAM_A, files_hash: hash(30), size_bytes: 7 }, Date.now() - 25 * 3_600_000);
    assert.equal(await records.repo.teamBytes(TEAM_A), MAX + 7);
    await files.sweep(7 * 86_400_000);
    assert.equal(await records.repo.teamBytes(TEAM_A), MAX);
  });

  test(`[${tdb.driver}] files no build asked for in the keep time leave the store; files a build asked for stay; a failed removal is tried again`, { skip: tdb.skip }, async (t) => {
    const store = memoryStore();
    const records = await recordsOn(await tdb.create!());
    t.after(records.close);
    const DAY = 86_400_000;
    let now = Date.UTC(2026, 10, 1);
    const files = new ContextFiles({ templateCenter: store.client, masterAddr: 'http://master', signingKey: 'k', logger: silentLogger(), records: records.repo, teamMaxBytes: 1 << 30, now: () => now });
    const app = createHttpApp({ logger: silentLogger() });
    await files.registerRoutes(app);
    await app.ready();
    t.after(() => app.close());
    const upload = async (hash: string, team: string, body: string) => {
      const link = new URL((await files.uploadLink(hash, team, 'http://api')).url!);
      const res = await app.inject({ method: 'PUT', url: link.pathname + link.search, payload: body, headers: { 'content-type': 'application/octet-stream', 'content-length': String(body.length) } });
      assert.equal(res.statusCode, 200);
    };
    const [OLD, USED, NEW] = ['b'.repeat(64), 'c'.repeat(64), 'd'.repeat(64)];
    await upload(OLD, TEAM_A, 'old');
    await upload(USED, TEAM_A, 'used');
    await upload(OLD, TEAM_B, 'B\'s old');
    now += 5 * DAY;
    assert.ok(await files.input(USED, TEAM_A), 'a build asked for it on day 5');
    await upload(NEW, TEAM_B, 'new');
    now += 3 * DAY;
    assert.equal(await files.sweep(7 * DAY), 2, 'the two nobody used for 8 days');
    assert.equal(store.files.size, 2);
    assert.equal(await files.input(OLD, TEAM_A), undefined);
    assert.equal((await files.uploadLink(OLD, TEAM_B, 'http://api')).present, false, 'the SDK is asked to upload it again');
    assert.ok(await files.input(USED, TEAM_A));
    assert.ok(await files.input(NEW, TEAM_B));
    assert.equal(await files.sweep(7 * DAY), 0, 'nothing more to remove');

    // The store does not answer: the row comes back, and the next sweep removes the files.
    now += 8 * DAY;
    store.failDeletes(true);
    assert.equal(await files.sweep(7 * DAY), 0);
    assert.equal(store.files.size, 2);
    store.failDeletes(false);
    assert.equal(await files.sweep(7 * DAY), 2);
    assert.equal(store.files.size, 0);
  });
}
