import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { test } from 'node:test';
import { createHttpApp, silentLogger } from '@svc/common';
import type { TemplateCenterClient } from '@svc/contracts/template-center';
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
  const client = {
    async artifactInfo(id: string) { return info(id); },
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
  return { files, client: client as unknown as TemplateCenterClient };
}

test('a team\'s uploaded files are its own: present, copied and downloaded for it alone; an upload URL is good only for its team', async () => {
  const store = memoryStore();
  const files = new ContextFiles({ templateCenter: store.client, masterAddr: 'http://master', signingKey: 'k', logger: silentLogger() });
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
