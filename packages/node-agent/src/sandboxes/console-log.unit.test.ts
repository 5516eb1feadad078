import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxLogEntry } from '@svc/contracts/node-agent';
import { formatSandboxLogLine, parseSandboxLogsQuery, SANDBOX_LOG_LIMITS } from '@svc/contracts/sandbox-logs';
import { readConsoleLog } from './console-log.ts';

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const entry = (s: number, message: string, level: SandboxLogEntry['level'] = 'info'): SandboxLogEntry => ({ timestamp: at(s), level, message, fields: { logger: 'envd' } });
const q = (raw: Record<string, unknown> = {}) => parseSandboxLogsQuery(raw);

async function withFile(fn: (path: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'console-log-'));
  try {
    await fn(join(dir, 'console.log'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test("entries as written; a plain line takes the time of the line before; what precedes every timed line, and a line still being written, are left out", () => withFile(async (path) => {
  await writeFile(path, [
    'runsc: a line from before svc marked boots\n',
    formatSandboxLogLine(entry(1, 'sandbox booting')),
    'running container: plain output of runsc\n',
    '{"not": "an entry"}\n',
    '\n',
    formatSandboxLogLine(entry(2, 'envd: uncaught exception', 'error')),
    formatSandboxLogLine(entry(3, 'half written')).slice(0, 20),
  ].join(''));
  assert.deepEqual(await readConsoleLog(path, q()), [
    entry(1, 'sandbox booting'),
    { timestamp: at(1), level: 'info', message: 'running container: plain output of runsc', fields: {} },
    { timestamp: at(1), level: 'info', message: '{"not": "an entry"}', fields: {} },
    entry(2, 'envd: uncaught exception', 'error'),
  ]);
}));

test('a read holds `limit` entries: forward stops at them, backward keeps the last ones, newest first', () => withFile(async (path) => {
  const lines: string[] = [];
  for (let i = 0; i < 5000; i++) lines.push(formatSandboxLogLine(entry(i, `line ${i}`, i % 2 ? 'warn' : 'info')));
  await writeFile(path, lines.join(''));
  const messages = async (raw: Record<string, unknown>) => (await readConsoleLog(path, q(raw))).map((e) => e.message);
  assert.equal((await readConsoleLog(path, q())).length, SANDBOX_LOG_LIMITS.defaultEntries);
  assert.deepEqual(await messages({ limit: 3 }), ['line 0', 'line 1', 'line 2']);
  assert.deepEqual(await messages({ limit: 3, direction: 'backward' }), ['line 4999', 'line 4998', 'line 4997']);
  assert.deepEqual(await messages({ limit: 2, cursor: Date.parse(at(4000)) }), ['line 4000', 'line 4001']);
  assert.deepEqual(await messages({ limit: 2, cursor: Date.parse(at(4000)), direction: 'backward', level: 'warn' }), ['line 3999', 'line 3997']);
  assert.deepEqual(await messages({ search: 'line 4321' }), ['line 4321']);
}));

test('an overlong line is cut, not held whole; the lines after it read as ever', () => withFile(async (path) => {
  await writeFile(path, formatSandboxLogLine(entry(1, 'before')));
  await appendFile(path, `${'x'.repeat(SANDBOX_LOG_LIMITS.lineMaxBytes * 3)}\n`);
  await appendFile(path, formatSandboxLogLine(entry(2, 'y'.repeat(SANDBOX_LOG_LIMITS.messageMaxChars + 10))));
  await appendFile(path, formatSandboxLogLine(entry(3, 'after')));
  const got = await readConsoleLog(path, q());
  assert.deepEqual(got.map((e) => e.timestamp), [at(1), at(1), at(2), at(3)]);
  assert.ok(got[1]!.message.length <= SANDBOX_LOG_LIMITS.messageMaxChars + 10 && got[1]!.message.startsWith('xxx'));
  assert.ok(got[2]!.message.endsWith('… (cut)') && got[2]!.message.length < SANDBOX_LOG_LIMITS.messageMaxChars + 10);
  assert.equal(got[3]!.message, 'after');
}));

test('no console file yet: no entries', () => withFile(async (path) => {
  assert.deepEqual(await readConsoleLog(path, q()), []);
}));
