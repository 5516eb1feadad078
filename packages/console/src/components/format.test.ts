import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bytes, metadataText, percent, relative, shortWhen } from './format.ts';

test('sizes, shares and times read as a person writes them', () => {
  assert.equal(bytes(0), '0 B');
  assert.equal(bytes(1536), '1.5 KiB');
  assert.equal(bytes(512 * 1024 * 1024), '512 MiB');
  assert.equal(bytes(undefined), '–');
  assert.equal(percent(3.14159), '3.1 %');
  assert.equal(percent(57.6), '58 %');
  assert.equal(relative(new Date(10_000 + 90_000).toISOString(), 10_000), 'in 2 min');
  assert.equal(relative(new Date(0).toISOString(), 12_000), '12 s ago');
  assert.equal(relative('not a time'), 'not a time');
  assert.equal(relative(new Date(5_000).toISOString(), 5_200), 'now');
  assert.equal(metadataText({ a: '1', b: 'x' }), 'a=1, b=x');
  assert.equal(metadataText({}), '–');
  const noon = new Date(2026, 10, 28, 12, 0, 0).getTime();
  assert.match(shortWhen(new Date(2026, 10, 28, 9, 5, 7).toISOString(), noon), /09.05.07/, 'today: the time of day');
  assert.doesNotMatch(shortWhen(new Date(2026, 10, 20, 9, 5, 7).toISOString(), noon), /:07/, 'another day: the day and the minute');
});
