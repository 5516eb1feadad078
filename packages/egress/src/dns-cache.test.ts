import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DnsCache } from './dns-cache.ts';

/** A lookup that counts its calls and answers from a table (or fails for names it lacks). */
function countingLookup(table: Record<string, string>) {
  const calls: string[] = [];
  const lookup = async (host: string) => {
    calls.push(host);
    await new Promise((r) => setTimeout(r, 5));
    const ip = table[host];
    if (ip === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return ip;
  };
  return { calls, lookup };
}

test('an answer is reused until its time is up, then looked up again', async () => {
  let now = 0;
  const { calls, lookup } = countingLookup({ 'api.example.test': '10.1.2.3' });
  const cache = new DnsCache(lookup, 1_000, () => now);
  assert.equal(await cache.resolve('api.example.test'), '10.1.2.3');
  assert.equal(cache.cached('api.example.test'), '10.1.2.3');
  now = 999;
  assert.equal(await cache.resolve('api.example.test'), '10.1.2.3');
  assert.deepEqual(calls, ['api.example.test']);
  now = 1_000;
  assert.equal(cache.cached('api.example.test'), undefined, 'stale answers are not given');
  assert.equal(await cache.resolve('api.example.test'), '10.1.2.3');
  assert.equal(calls.length, 2);
});

test('lookups of one name at once share one call; a failure is not kept', async () => {
  const table: Record<string, string> = {};
  const { calls, lookup } = countingLookup(table);
  const cache = new DnsCache(lookup, 10_000);
  const failures = await Promise.allSettled([cache.resolve('late.example.test'), cache.resolve('late.example.test')]);
  assert.deepEqual(failures.map((f) => f.status), ['rejected', 'rejected']);
  assert.equal(calls.length, 1);
  assert.equal(cache.cached('late.example.test'), undefined);
  table['late.example.test'] = '10.9.9.9';
  const [a, b] = await Promise.all([cache.resolve('late.example.test'), cache.resolve('late.example.test')]);
  assert.equal(a, '10.9.9.9');
  assert.equal(b, '10.9.9.9');
  assert.equal(calls.length, 2, 'the name that failed is asked again, once for both');
});
