import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitAtMost, withDeadline } from './deadline.ts';

const never = new Promise<never>(() => {});
const after = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms));

test('withDeadline: the work\'s answer or error when in time, late()\'s error when not', async () => {
  assert.equal(await withDeadline(after(5, 'ok'), 1_000, () => new Error('late')), 'ok');
  await assert.rejects(withDeadline(Promise.reject(new Error('own')), 1_000, () => new Error('late')), /own/);
  await assert.rejects(withDeadline(never, 20, () => new Error('no answer within 20 ms')), /no answer within 20 ms/);
});

test('waitAtMost: the work\'s answer, its error, or undefined at the time', async () => {
  assert.equal(await waitAtMost(after(5, 7), 1_000), 7);
  await assert.rejects(waitAtMost(Promise.reject(new Error('own')), 1_000), /own/);
  assert.equal(await waitAtMost(never, 20), undefined);
});

test('a wait that ended leaves no timer holding the process open', async () => {
  const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  await withDeadline(Promise.resolve(1), 60_000, () => new Error('late'));
  await waitAtMost(Promise.resolve(1), 60_000);
  await assert.rejects(waitAtMost(Promise.reject(new Error('x')), 60_000));
  assert.equal(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length, before);
});
