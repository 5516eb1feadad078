/**
 * What bounds a session's tool calls: how many run at once, how much output a call may print and
 * keep, and what of a failure's message the model sees (never the platform's internal addresses).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectInMemory, memoryLog, textOf } from './test-support/client.ts';
import { startFakePlatform, type FakePlatform } from './test-support/fake-platform.ts';
import { keepTail, OutputTail } from './output.ts';

let fake: FakePlatform;
let mcp: Awaited<ReturnType<typeof connectInMemory>>;
let id: string;
const conn = () => ({ apiUrl: fake.api.url, apiKey: fake.apiKey, sandboxUrl: fake.sandboxUrl });

before(async () => {
  fake = await startFakePlatform();
  mcp = await connectInMemory(conn());
  id = (await mcp.call('create_sandbox', {})).structuredContent!.sandboxId as string;
});
after(async () => {
  await mcp.close();
  await fake.close();
});

test('a session runs 8 tool calls at once; the next is a tool error saying so, not a wait', async () => {
  const answeredAt: number[] = [];
  const calls = Array.from({ length: 9 }, (_, i) => mcp.call('run_command', { sandboxId: id, command: 'sleep 1' }).then((r) => { answeredAt[i] = performance.now(); return r; }));
  // Listing, killing, pausing and URLs run outside the limit: a client can still see and stop its sandboxes.
  const listed = await mcp.call('list_sandboxes', {});
  assert.ok(!listed.isError, 'list_sandboxes while eight calls run');
  const results = await Promise.all(calls);
  const refused = results.flatMap((r, i) => (r.isError ? [i] : []));
  assert.equal(refused.length, 1);
  assert.match(textOf(results[refused[0]]), /^too many tool calls at once: 8 are under way in this MCP session/);
  assert.equal(results.filter((r) => /^exit code 0/.test(textOf(r))).length, 8);
  // Not a wait: answered before any of the eight ended (by order, not by the clock, which a loaded
  // machine stretched past the 5 s this test allowed once).
  assert.ok(answeredAt[refused[0]] < Math.min(...answeredAt.filter((_, i) => i !== refused[0])), 'the refusal came before any of the eight ended');
  assert.ok(!(await mcp.call('list_sandboxes', {})).isError, 'the places are given back');
});

test('run_command past 16 MB of output is killed, and its answer keeps the tail only', async () => {
  const r = await mcp.call('run_command', { sandboxId: id, command: 'head -c 17000000 /dev/zero | tr "\\0" a; echo END; sleep 20', timeoutSeconds: 30 });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /^the command printed more than 16 MB and was killed;/);
  assert.ok(textOf(r).length < 60_000, `${textOf(r).length} characters`);
});

test('list_files reads at most 8 MiB of listing: a larger one is a tool error saying how to ask for less, not 64 MiB buffered', async () => {
  // ~3.5 KB an entry (long paths), 2,600 entries: past 8 MiB, far below the SDK's default 64 MiB
  const base = mkdtempSync(join(tmpdir(), 'svc-mcp-list-'));
  try {
    const deep = join(base, ...Array.from({ length: 14 }, (_, i) => `${i}`.padEnd(200, 'd')));
    mkdirSync(deep, { recursive: true });
    for (let i = 0; i < 2_600; i++) writeFileSync(join(deep, `${i}`.padEnd(200, 'f')), '');
    const r = await mcp.call('list_files', { sandboxId: id, path: deep, depth: 2 });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /^the listing of \/\S+ is larger than 8 MiB, more than list_files reads; ask for a smaller depth or a deeper path$/);
    const one = await mcp.call('list_files', { sandboxId: id, path: deep });
    assert.match(textOf(one), /is larger than 8 MiB, more than list_files reads; list a deeper path, or look with run_command \(ls /);
    assert.ok(!(await mcp.call('list_files', { sandboxId: id, path: base })).isError, 'a small listing is as before');
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test('run_code takes a line of the interpreter\'s answer of at most 4 MB: a larger one stops the run with a tool error before it is parsed', async () => {
  fake.ci.onExecute = async (_req, answer) => {
    answer.start();
    answer.line({ type: 'result', text: 'x'.repeat(5 * 1024 * 1024), is_main_result: true });
    answer.end();
  };
  const r = await mcp.call('run_code', { code: 'display("x" * 5 * 2**20)', sandboxId: id });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /^the code printed more than 2 MB and its output was cut off;/);
});

test('OutputTail keeps what keepTail returns of the whole, whatever the pieces', () => {
  const pieces = ['abc', 'x'.repeat(70), '', 'y'.repeat(25), 'tail'];
  for (const max of [5, 20, 50, 500]) {
    const tail = new OutputTail(max);
    for (const p of pieces) tail.push(p);
    assert.equal(tail.text, keepTail(pieces.join(''), max).text, `max ${max}`);
  }
});

test('an unreachable platform: the model is told which call failed, not the address; the log has it', async () => {
  const log = memoryLog();
  const s = await connectInMemory({ apiUrl: 'http://127.0.0.1:1', apiKey: 'k', sandboxUrl: 'http://10.1.2.3:1' }, log);
  const r = await s.call('list_sandboxes', {});
  assert.equal(r.isError, true);
  assert.match(textOf(r), /^list_sandboxes could not reach the platform: the connection failed/);
  assert.doesNotMatch(textOf(r), /127\.0\.0\.1|:1\b/);
  const line = log.lines.find((l) => l.msg === 'an MCP tool could not reach the platform');
  assert.match(String((line?.obj as { err?: string })?.err), /127\.0\.0\.1:1/);
  await s.close();
});
