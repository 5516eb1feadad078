import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BuildLog } from './build-log.ts';
import { BuildSlots } from './build-slots.ts';

/** A build's log kept in memory. */
function memoryLog(): { lines: string[]; log: BuildLog } {
  const lines: string[] = [];
  return { lines, log: async (_level, message) => { lines.push(message); } };
}

/** Work that runs until the test lets it end, noting when it started. */
function heldWork(started: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((r) => { finish = r; });
  return { finish, work: async () => { started.push(name); await done; return name; } };
}

const tick = () => new Promise((r) => setImmediate(r));

test('a team that queued many builds does not hold another team\'s behind all of them', async () => {
  const slots = new BuildSlots(1);
  const started: string[] = [];
  const first = heldWork(started, 'a0');
  const running = slots.inSlot('team-a', memoryLog().log, first.work);
  const queuedA = [1, 2, 3, 4, 5].map((i) => ({ ...heldWork(started, `a${i}`), ...memoryLog() }));
  const runsA = queuedA.map((q) => slots.inSlot('team-a', q.log, q.work));
  const b = { ...heldWork(started, 'b1'), ...memoryLog() };
  const runB = slots.inSlot('team-b', b.log, b.work);
  await tick();
  assert.deepEqual(started, ['a0']);
  assert.deepEqual(queuedA[4]!.lines, ['Queued: 1 build(s) running on this master, 4 waiting before this one (teams take turns)']);
  assert.deepEqual(b.lines, ['Queued: 1 build(s) running on this master, 1 waiting before this one (teams take turns)'], 'only a1 is ahead of it, not all five');

  first.finish();
  await running;
  await tick();
  queuedA[0]!.finish();
  await runsA[0];
  await tick();
  assert.deepEqual(started, ['a0', 'a1', 'b1'], 'team-b\'s build runs second, not sixth');
  assert.equal(b.lines.at(-1), 'Starting: a build slot is free');
  b.finish();
  for (const [i, q] of queuedA.entries()) {
    q.finish();
    assert.equal(await runsA[i], `a${i + 1}`);
  }
  assert.equal(await runB, 'b1');
  assert.deepEqual(started, ['a0', 'a1', 'b1', 'a2', 'a3', 'a4', 'a5']);
});

test('a build that cannot write its queued line fails and gives up its place', async () => {
  const slots = new BuildSlots(1);
  const started: string[] = [];
  const first = heldWork(started, 'first');
  const running = slots.inSlot('team-a', memoryLog().log, first.work);
  const broken: BuildLog = async () => { throw new Error('database gone'); };
  await assert.rejects(slots.inSlot('team-b', broken, async () => { started.push('never'); }), /database gone/);
  const next = { ...heldWork(started, 'next'), ...memoryLog() };
  const runNext = slots.inSlot('team-c', next.log, next.work);
  await tick();
  assert.deepEqual(next.lines, ['Queued: 1 build(s) running on this master, 0 waiting before this one (teams take turns)'], 'the failed build left the queue');
  first.finish();
  await running;
  next.finish();
  await runNext;
  assert.deepEqual(started, ['first', 'next']);
});
