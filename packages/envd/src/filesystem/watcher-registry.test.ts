import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { WatcherRegistry } from './watcher-registry.ts';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'envd-polled-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const noEvents = async () => [];

test('a polled watcher is kept however long it goes unpolled (a long job, a pause and resume)', async () => {
  let now = 0;
  const registry = new WatcherRegistry({ now: () => now, log: () => {} });
  const id = await registry.create(dir, false, noEvents);
  now += 24 * 3_600_000;
  assert.deepEqual(registry.drain(id), [], 'polled again a day later');
  registry.remove(id);
});

test('past the cap a create removes the least recently polled watcher, says so in the log and to its poller', async () => {
  let now = 0;
  const lines: string[] = [];
  const registry = new WatcherRegistry({ maxWatchers: 3, now: () => now, log: (l) => lines.push(l) });
  const [a, b, c] = [await registry.create(dir, false, noEvents), await registry.create(dir, false, noEvents), await registry.create(dir, false, noEvents)] as [string, string, string];
  now = 1_000;
  registry.drain(a);
  registry.drain(c);
  now = 5_000;
  const d = await registry.create(dir, false, noEvents);
  assert.throws(() => registry.drain(b), { code: 'not_found', message: /removed to make room for a new one/ });
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, new RegExp(`watcher ${b} of ${dir} removed to make room for a new one: 3 watchers exist, and it was polled least recently \\(5 s ago\\)`));
  for (const id of [a, c, d]) assert.deepEqual(registry.drain(id), []);
  // Never polled: counted from its creation.
  now = 6_000;
  const e = await registry.create(dir, false, noEvents);
  assert.throws(() => registry.drain(a), { code: 'not_found' }, 'a, c and d were polled at 5 s; a is the first of them');
  for (const id of [c, d, e]) registry.remove(id);
  assert.throws(() => registry.drain('wnot-a-watcher'), (err: Error & { code?: string }) => err.code === 'not_found' && !/make room/.test(err.message));
});
