import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { Api, ApiError } from './api.ts';

const realFetch = globalThis.fetch;
afterEach(() => { globalThis.fetch = realFetch; });

/** A fetch that fails with the browser's network error `failures` times, then answers `[]`. */
function flakyFetch(failures: number): { calls: string[] } {
  const seen = { calls: [] as string[] };
  globalThis.fetch = (async (url: string, init: { method: string }) => {
    seen.calls.push(`${init.method} ${url}`);
    if (seen.calls.length <= failures) throw new TypeError('Failed to fetch');
    return new Response('[]', { status: 200, headers: { 'content-type': 'application/json' } });
  }) as typeof fetch;
  return seen;
}

test('a read that meets a network failure (a network change) is asked once more and answers', async () => {
  const seen = flakyFetch(1);
  assert.deepEqual(await new Api('k').get('/v2/sandboxes', { limit: 100 }), []);
  assert.deepEqual(seen.calls, ['GET /v2/sandboxes?limit=100', 'GET /v2/sandboxes?limit=100']);
});

test('a read that fails twice is a network error, not a third try', async () => {
  const seen = flakyFetch(5);
  await assert.rejects(new Api('k').get('/v2/sandboxes'), (err: ApiError) => err.status === 0 && err.code === 'network' && /did not answer: Failed to fetch/.test(err.message));
  assert.equal(seen.calls.length, 2);
});

test('a write is never repeated after a network failure: it may have been done', async () => {
  const seen = flakyFetch(2);
  await assert.rejects(new Api('k').post('/sandboxes/x/pause'), (err: ApiError) => err.code === 'network');
  await assert.rejects(new Api('k').delete('/sandboxes/x'), (err: ApiError) => err.code === 'network');
  assert.deepEqual(seen.calls, ['POST /sandboxes/x/pause', 'DELETE /sandboxes/x']);
});
