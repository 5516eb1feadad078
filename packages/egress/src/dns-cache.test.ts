import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DnsBusyError, DnsCache, DnsTimeoutError, type DnsLimits } from './dns-cache.ts';

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

test('lookups of one name at once share one call; a failure is kept for failureTtlMs, then asked again', async () => {
  let now = 0;
  const table: Record<string, string> = {};
  const { calls, lookup } = countingLookup(table);
  const cache = new DnsCache(lookup, 10_000, () => now, { timeoutMs: 1_000, failureTtlMs: 5_000, maxInFlightPerOwner: 4 });
  const failures = await Promise.allSettled([cache.resolve('late.example.test'), cache.resolve('late.example.test')]);
  assert.deepEqual(failures.map((f) => f.status), ['rejected', 'rejected']);
  assert.equal(calls.length, 1);
  assert.equal(cache.cached('late.example.test'), undefined);
  table['late.example.test'] = '10.9.9.9';
  now = 4_999;
  await assert.rejects(cache.resolve('late.example.test'), { code: 'ENOTFOUND' });
  assert.equal(calls.length, 1, 'the failure is the answer for a while: no lookup');
  now = 5_000;
  const [a, b] = await Promise.all([cache.resolve('late.example.test'), cache.resolve('late.example.test')]);
  assert.equal(a, '10.9.9.9');
  assert.equal(b, '10.9.9.9');
  assert.equal(calls.length, 2, 'the name that failed is asked again, once for both');
});

/** A lookup that never answers until told to, as a name whose nameserver is silent. */
function silentLookup() {
  const calls: string[] = [];
  const waiting = new Map<string, (ip: string) => void>();
  const lookup = (host: string) => new Promise<string>((resolve) => { calls.push(host); waiting.set(host, resolve); });
  return { calls, waiting, lookup };
}

const FAST: DnsLimits = { timeoutMs: 30, failureTtlMs: 5_000, maxInFlightPerOwner: 4 };

test('a lookup without an answer fails its waiters at the timeout; the failure is kept, and the lookup is not started again', async () => {
  let now = 0;
  const { calls, waiting, lookup } = silentLookup();
  const cache = new DnsCache(lookup, 10_000, () => now, FAST);
  await assert.rejects(cache.resolve('silent.example.test'), (err: unknown) => err instanceof DnsTimeoutError && /no answer within 0\.03 s/.test(err.message));
  await assert.rejects(cache.resolve('silent.example.test'), DnsTimeoutError, 'kept: refused at once');
  now = 5_000;
  await assert.rejects(cache.resolve('silent.example.test'), DnsTimeoutError);
  assert.deepEqual(calls, ['silent.example.test'], 'the running lookup is joined, never started twice');
  // It answers at last: the answer is kept, and the failure forgotten.
  waiting.get('silent.example.test')!('10.1.1.1');
  await new Promise((r) => setImmediate(r));
  assert.equal(await cache.resolve('silent.example.test'), '10.1.1.1');
});

test('an owner has at most maxInFlightPerOwner lookups running; others are served; a slot frees when its lookup itself ends', async () => {
  const { calls, waiting, lookup } = silentLookup();
  const cache = new DnsCache(lookup, 10_000, undefined, { ...FAST, timeoutMs: 60_000 });
  const mine = [1, 2, 3, 4].map((i) => cache.resolve(`r${i}.attacker-ns.example`, '10.0.0.2'));
  await assert.rejects(cache.resolve('r5.attacker-ns.example', '10.0.0.2'), DnsBusyError);
  assert.equal(calls.length, 4, 'the fifth was not looked up');
  // A request for a name already being looked up waits on that lookup: it starts none, and is no fifth.
  const joined = Array.from({ length: 8 }, () => cache.resolve('r2.attacker-ns.example', '10.0.0.2'));
  assert.equal(calls.length, 4);
  // Another sandbox is not held up by the first one's share.
  const other = cache.resolve('api.example.test', '10.0.0.3');
  waiting.get('api.example.test')!('10.2.2.2');
  assert.equal(await other, '10.2.2.2');
  waiting.get('r1.attacker-ns.example')!('10.3.3.3');
  assert.equal(await mine[0], '10.3.3.3');
  const fifth = cache.resolve('r5.attacker-ns.example', '10.0.0.2');
  assert.equal(calls.length, 6, 'a slot freed: the fifth is looked up now');
  for (const [host, answer] of waiting) if (host !== 'api.example.test' && host !== 'r1.attacker-ns.example') answer('10.4.4.4');
  assert.deepEqual(await Promise.all([...mine.slice(1), fifth]), ['10.4.4.4', '10.4.4.4', '10.4.4.4', '10.4.4.4']);
  assert.deepEqual(new Set(await Promise.all(joined)), new Set(['10.4.4.4']));
});

test('a timed-out lookup still counts against its owner until getaddrinfo returns: its thread is still busy', async () => {
  const { waiting, lookup } = silentLookup();
  const cache = new DnsCache(lookup, 10_000, undefined, { ...FAST, maxInFlightPerOwner: 1 });
  await assert.rejects(cache.resolve('slow.example.test', 'sbx'), DnsTimeoutError);
  await assert.rejects(cache.resolve('next.example.test', 'sbx'), DnsBusyError);
  waiting.get('slow.example.test')!('10.5.5.5');
  await new Promise((r) => setImmediate(r));
  const next = cache.resolve('next.example.test', 'sbx');
  waiting.get('next.example.test')!('10.6.6.6');
  assert.equal(await next, '10.6.6.6');
});
