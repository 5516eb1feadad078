import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryCoordination, silentLogger } from '@svc/common';
import { SpecDedup } from './spec-dedup.ts';

test('a job waiting for the same spec\'s build ends at its own cancel, not at the winner\'s end', async () => {
  const dedup = new SpecDedup<string>(new MemoryCoordination(), silentLogger());
  let finish!: (v: string) => void;
  const winner = dedup.run('spec-1', 'job-a', () => new Promise<string>((r) => { finish = r; }), { signal: new AbortController().signal });
  await new Promise((r) => setImmediate(r));
  const cancel = new AbortController();
  let waited = false;
  const waiter = dedup.run('spec-1', 'job-b', async () => 'built again', { signal: cancel.signal, onWait: () => { waited = true; } });
  await new Promise((r) => setImmediate(r));
  assert.ok(waited, 'the second job waits for the first');
  const started = Date.now();
  cancel.abort(new Error('the build was cancelled because its template was deleted'));
  await assert.rejects(waiter, /cancelled because its template was deleted/);
  assert.ok(Date.now() - started < 1_000, 'the cancel ends the wait at once');
  finish('artifact-1');
  assert.deepEqual(await winner, { value: 'artifact-1' });
});

test('a waiter still reuses the winner\'s result, and builds itself when the winner fails', async () => {
  const dedup = new SpecDedup<string>(new MemoryCoordination(), silentLogger());
  let fail!: (e: Error) => void;
  const winner = dedup.run('spec-2', 'job-a', () => new Promise<string>((_r, j) => { fail = j; }), { signal: new AbortController().signal });
  await new Promise((r) => setImmediate(r));
  const waiter = dedup.run('spec-2', 'job-b', async () => 'built by b', { signal: new AbortController().signal });
  await new Promise((r) => setImmediate(r));
  fail(new Error('winner failed'));
  await assert.rejects(winner, /winner failed/);
  assert.deepEqual(await waiter, { value: 'built by b' });
  const third = dedup.run('spec-3', 'job-c', async () => 'c', { signal: new AbortController().signal });
  const fourth = dedup.run('spec-3', 'job-d', async () => 'd', { signal: new AbortController().signal });
  assert.deepEqual(await third, { value: 'c' });
  assert.deepEqual(await fourth, { value: 'c', reusedFrom: 'job-c' });
});
