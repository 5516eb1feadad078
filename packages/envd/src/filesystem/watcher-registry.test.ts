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

test('polled watchers are capped: past the limit a create is resource_exhausted until one is removed', async () => {
  const registry = new WatcherRegistry({ maxWatchers: 3 });
  const ids = await Promise.all([1, 2, 3].map(() => registry.create(dir, false, noEvents)));
  await assert.rejects(registry.create(dir, false, noEvents), { code: 'resource_exhausted', message: /at most 3 watchers/ });
  registry.remove(ids[0]!);
  ids[0] = await registry.create(dir, false, noEvents);
  for (const id of ids) registry.remove(id);
});

test('a polled watcher not polled for the idle time is removed, and says so in the log', async () => {
  let now = 0;
  const lines: string[] = [];
  const registry = new WatcherRegistry({ idleMs: 1_000, now: () => now, log: (l) => lines.push(l) });
  const polled = await registry.create(dir, false, noEvents);
  const forgotten = await registry.create(dir, false, noEvents);
  now = 600;
  assert.deepEqual(registry.drain(polled), []);
  now = 1_500;
  assert.deepEqual(registry.drain(polled), [], 'polled 900 ms ago: kept');
  assert.throws(() => registry.drain(forgotten), { code: 'not_found' });
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, new RegExp(`watcher ${forgotten} of ${dir} removed: not polled`));
  registry.remove(polled);
});
