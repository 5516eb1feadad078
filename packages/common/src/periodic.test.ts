import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Periodic } from './periodic.ts';
import type { Logger } from './log.ts';

function recordingLogger() {
  const lines: Array<{ level: string; msg: string; task?: unknown }> = [];
  const at = (level: string) => (obj: object | string, msg?: string) => {
    lines.push(typeof obj === 'string' ? { level, msg: obj } : { level, msg: msg ?? '', task: (obj as { task?: unknown }).task });
  };
  const logger = { info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug'), child: () => logger } as unknown as Logger;
  return { logger, lines };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('failures are counted and logged once a streak; the end of a streak is logged; runs never overlap', async () => {
  const { logger, lines } = recordingLogger();
  const periodic = new Periodic(logger);
  let calls = 0;
  let inFlight = 0;
  let overlapped = false;
  periodic.every('sweep', 10, async () => {
    calls++;
    inFlight++;
    if (inFlight > 1) overlapped = true;
    await sleep(25); // longer than the interval
    inFlight--;
    if (calls <= 3) throw new Error('database is down');
  }, { firstAfterMs: 0 });
  while (calls < 5) await sleep(5);
  await periodic.stop();
  const s = periodic.stats().sweep!;
  assert.equal(overlapped, false);
  assert.ok(s.runs >= 5);
  assert.equal(s.failures, 3);
  assert.equal(s.failingSince, null);
  assert.equal(s.lastFailure, 'database is down');
  assert.ok(s.lastFailureAt);
  assert.deepEqual(lines.map((l) => `${l.level} ${l.msg}`), ['warn sweep failed', 'info sweep works again']);
});

test('a name is registered once', async () => {
  const periodic = new Periodic(recordingLogger().logger);
  periodic.every('x', 1000, () => {});
  assert.throws(() => periodic.every('x', 1000, () => {}), /already registered/);
  await periodic.stop();
});

test('a task stopped mid-run is waited for, and no run starts after stop', async () => {
  const { logger } = recordingLogger();
  const periodic = new Periodic(logger);
  let runs = 0;
  let finished = false;
  periodic.every('slow', 5, async () => { runs++; await sleep(40); finished = true; }, { firstAfterMs: 0 });
  await sleep(10);
  await periodic.stop();
  assert.equal(finished, true);
  await sleep(30);
  assert.equal(runs, 1);
});
