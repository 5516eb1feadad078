import { test } from 'node:test';
import assert from 'node:assert/strict';
import { atActivity, atConnect, atCreate, atPause, atRefresh, atResume, atSetTimeout, restartWindow } from './timeouts.ts';

const now = 1_000_000;
const s = (n: number) => n * 1000;

test('create: the timeout table', () => {
  assert.deepEqual(atCreate(now, undefined, -1), { timeoutSec: -1, endAt: null }, 'omitted, no server default: never');
  assert.deepEqual(atCreate(now, undefined, 0), { timeoutSec: -1, endAt: null }, 'omitted, default 0 is not positive: never');
  assert.deepEqual(atCreate(now, undefined, 300), { timeoutSec: 300, endAt: now + s(300) }, 'omitted: server default');
  assert.deepEqual(atCreate(now, -1, 300), { timeoutSec: -1, endAt: null }, '-1 never');
  assert.deepEqual(atCreate(now, 0, 300), { timeoutSec: 0, endAt: now }, '0 immediate');
  assert.deepEqual(atCreate(now, 30, 300), { timeoutSec: 30, endAt: now + s(30) }, 'N seconds, not milliseconds');
  assert.throws(() => atCreate(now, -2, 300), /timeout/);
  assert.throws(() => atCreate(now, 1.5, 300), /integer/);
});

test('connect: the connect table', () => {
  const cur = { timeoutSec: 60, endAt: now + s(60) };
  assert.deepEqual(atConnect(now, cur, undefined, false), cur, 'omitted keeps the current timeout');
  assert.deepEqual(atConnect(now, cur, -1, false), { timeoutSec: -1, endAt: null }, '-1 never');
  assert.deepEqual(atConnect(now, cur, 30, false), cur, 'a longer existing deadline is kept');
  assert.deepEqual(atConnect(now, cur, 120, false), { timeoutSec: 120, endAt: now + s(120) }, 'at least N seconds remain');
  assert.throws(() => atConnect(now, cur, 0, false), (e: { status: number }) => e.status === 400);
  assert.throws(() => atConnect(now, cur, -5, false), (e: { status: number }) => e.status === 400);
  const never = { timeoutSec: -1, endAt: null };
  assert.deepEqual(atConnect(now, never, 30, false), never, 'a running never-timeout sandbox only extends: stays never');
  assert.deepEqual(atConnect(now, never, 30, true), { timeoutSec: 30, endAt: now + s(30) }, 'resumed: a new N-second window');
  const expired = { timeoutSec: 60, endAt: now - s(10) };
  assert.deepEqual(atConnect(now, expired, undefined, true), { timeoutSec: 60, endAt: now + s(60) }, 'resumed: the idle clock restarts');
});

test('deprecated resume: the resume table', () => {
  const cur = { timeoutSec: 60, endAt: now - s(5) };
  assert.deepEqual(atResume(now, cur, undefined), { timeoutSec: 60, endAt: now + s(60) }, 'omitted keeps the timeout');
  assert.deepEqual(atResume(now, cur, 0), { timeoutSec: 60, endAt: now + s(60) }, '0 keeps the timeout');
  assert.deepEqual(atResume(now, cur, -1), { timeoutSec: -1, endAt: null }, '-1 never');
  assert.deepEqual(atResume(now, cur, 10), { timeoutSec: 10, endAt: now + s(10) }, 'N starts a new window');
  assert.throws(() => atResume(now, cur, -3), (e: { status: number }) => e.status === 400);
});

test('set_timeout may shorten, refresh and activity only extend, pause keeps', () => {
  assert.deepEqual(atSetTimeout(now, 5), { timeoutSec: 5, endAt: now + s(5) });
  assert.deepEqual(atSetTimeout(now, -1), { timeoutSec: -1, endAt: null });
  assert.throws(() => atSetTimeout(now, 1.5), /integer/);
  const cur = { timeoutSec: 60, endAt: now + s(10) };
  assert.deepEqual(atRefresh(now, cur, undefined), { timeoutSec: 60, endAt: now + s(60) });
  assert.deepEqual(atRefresh(now, cur, 5), cur, 'refresh never shortens');
  assert.deepEqual(atActivity(now, cur), { timeoutSec: 60, endAt: now + s(60) });
  assert.deepEqual(atActivity(now, { timeoutSec: 0, endAt: now }), { timeoutSec: 0, endAt: now }, 'immediate stays immediate');
  assert.deepEqual(atPause(cur), cur);
  assert.deepEqual(restartWindow(now, { timeoutSec: -1, endAt: null }), { timeoutSec: -1, endAt: null });
});
