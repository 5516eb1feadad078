import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Level } from './build-log.ts';
import { STEP_LOG_LINE_MAX, StepOutput } from './step-output.ts';

test('a step printing megabytes without a newline: entries of at most STEP_LOG_LINE_MAX, and nothing held growing', async () => {
  const entries: Array<[Level, string]> = [];
  const out = new StepOutput(async (level, message) => { entries.push([level, message]); });
  for (let i = 0; i < 64; i++) out.add('stdout', 'x'.repeat(64 * 1024));
  out.add('stdout', 'y\nshort line\n');
  out.add('stderr', `${'e'.repeat(STEP_LOG_LINE_MAX + 10)}\n`);
  await out.end();
  assert.ok(entries.every(([, m]) => m.length <= STEP_LOG_LINE_MAX + 40), 'no entry past the cap');
  const xs = entries.reduce((n, [, m]) => n + (m.match(/x/g)?.length ?? 0), 0);
  assert.ok(xs >= 64 * 64 * 1024 - STEP_LOG_LINE_MAX, `${xs}: the long line is there, in pieces (its last piece cut at the cap)`);
  assert.ok(entries.some(([l, m]) => l === 'info' && m === 'short line'));
  assert.ok(entries.some(([l, m]) => l === 'warn' && m.endsWith(' … (10 more characters)')));
});
