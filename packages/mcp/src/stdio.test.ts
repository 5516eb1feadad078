/**
 * serveStdio over in-memory streams: nothing but JSON-RPC lines on stdout, the tools, and at the
 * end of stdin the session closes, killing its code sandbox.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, test } from 'node:test';
import { serveStdio } from './stdio.ts';
import { memoryLog } from './test-support/client.ts';
import { startFakePlatform, type FakePlatform } from './test-support/fake-platform.ts';

let fake: FakePlatform;
before(async () => { fake = await startFakePlatform(); });
after(() => fake.close());

test('a session over stdio ends with stdin, killing its code sandbox', async () => {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const lines: Array<{ id?: number; result?: { content?: Array<{ text?: string }> } }> = [];
  let buffered = '';
  const waiters = new Map<number, (line: unknown) => void>();
  stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let i = buffered.indexOf('\n'); i >= 0; i = buffered.indexOf('\n')) {
      const line = JSON.parse(buffered.slice(0, i)); // anything but JSON-RPC on stdout would throw here
      buffered = buffered.slice(i + 1);
      lines.push(line);
      if (typeof line.id === 'number') waiters.get(line.id)?.(line);
    }
  });
  const request = (id: number, method: string, params: unknown) => new Promise<any>((resolve) => {
    waiters.set(id, resolve);
    stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
  });
  const served = serveStdio({ apiUrl: fake.api.url, apiKey: fake.apiKey, sandboxUrl: fake.sandboxUrl }, { stdin, stdout, log: memoryLog() });

  const init = await request(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } });
  assert.equal(init.result.serverInfo.name, 'svc');
  stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  assert.equal((await request(2, 'tools/list', {})).result.tools.length, 11);
  const ran = await request(3, 'tools/call', { name: 'run_code', arguments: { code: '1' } });
  const id = /code sandbox (\S+)/.exec(ran.result.content[0].text)![1];
  assert.ok(fake.api.sandboxes.has(id));
  stdin.end();
  await served;
  assert.equal(fake.api.sandboxes.has(id), false, 'killed when stdin ended');
  assert.equal(lines.length, 3);
});
