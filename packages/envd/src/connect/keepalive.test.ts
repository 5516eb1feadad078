import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keepaliveIntervalMs } from './keepalive.ts';

test('Keepalive-Ping-Interval is held to 1 s .. 1 h; past Node\'s 32-bit timers it would fire every millisecond', () => {
  const ms = (value: string | undefined) => keepaliveIntervalMs(value === undefined ? {} : { 'keepalive-ping-interval': value });
  assert.equal(ms('3000000'), 3_600_000);
  assert.equal(ms(String(2 ** 40)), 3_600_000);
  assert.equal(ms('3600'), 3_600_000);
  assert.equal(ms('30'), 30_000);
  assert.equal(ms('1'), 1_000);
  for (const bad of [undefined, '0', '-5', '0.5', 'soon', '']) assert.equal(ms(bad), 90_000, String(bad));
});
