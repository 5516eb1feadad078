/**
 * What bounds a session's tool calls: how many run at once, how much output a call may print and
 * keep, and what of a failure's message the model sees (never the platform's internal addresses).
 */
import assert from 'node:assert/strict';
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
  const started = Date.now();
  const calls = Array.from({ length: 9 }, () => mcp.call('run_command', { sandboxId: id, command: 'sleep 1' }));
  // Listing, killing, pausing and URLs run outside the limit: a client can still see and stop its sandboxes.
  const listed = await mcp.call('list_sandboxes', {});
  assert.ok(!listed.isError, 'list_sandboxes while eight calls run');
  const results = await Promise.all(calls);
  const refused = results.filter((r) => r.isError);
  assert.equal(refused.length, 1);
  assert.match(textOf(refused[0]), /^too many tool calls at once: 8 are under way in this MCP session/);
  assert.equal(results.filter((r) => /^exit code 0/.test(textOf(r))).length, 8);
  assert.ok(Date.now() - started < 5_000);
  assert.ok(!(await mcp.call('list_sandboxes', {})).isError, 'the places are given back');
});

test('run_command past 16 MB of output is killed, and its answer keeps the tail only', async () => {
  const r = await mcp.call('run_command', { sandboxId: id, command: 'head -c 17000000 /dev/zero | tr "\\0" a; echo END; sleep 20', timeoutSeconds: 30 });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /^the command printed more than 16 MB and was killed;/);
  assert.ok(textOf(r).length < 60_000, `${textOf(r).length} characters`);
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
