/**
 * `svc mcp` as an MCP client starts it: a child process speaking MCP over stdio, with the
 * connection of the data directory's endpoint.json, against the fake API and envd; it ends
 * when the client closes its stdin.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startFakeApi, type FakeApi } from '@svc/sdk/testing/fake-api';
import { startFakeEnvd, type FakeEnvd } from '@svc/sdk/testing/fake-envd';
import { bundleSvc } from '../test-support/svc-child.ts';

let api: FakeApi;
let envd: FakeEnvd;
let home: string;
let bundle: string;

before(async () => {
  api = await startFakeApi({ apiKey: 'key-mcp-cli' });
  envd = await startFakeEnvd();
  home = mkdtempSync(join(tmpdir(), 'svc-mcp-home-'));
  bundle = await bundleSvc(home);
});
after(async () => {
  await envd.close();
  await api.close();
  rmSync(home, { recursive: true, force: true });
});

test('svc mcp serves the tools over stdio with the data directory\'s endpoint, and ends when stdin does', async () => {
  const dataDir = join(home, 'data');
  mkdirSync(dataDir);
  writeFileSync(join(dataDir, 'endpoint.json'), JSON.stringify({ apiUrl: api.url, apiKey: 'key-mcp-cli', sandboxUrl: envd.url }));
  const transport = new StdioClientTransport({
    command: process.execPath, args: [bundle, '--data-dir', dataDir, 'mcp'], env: { PATH: process.env.PATH ?? '', HOME: home }, stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
  const client = new Client({ name: 'svc-cli-test', version: '1.0.0' });
  await client.connect(transport);
  const pid = transport.pid!;
  assert.equal((await client.listTools()).tools.length, 11);
  const created = await client.callTool({ name: 'create_sandbox', arguments: {} });
  const id = (created.structuredContent as { sandboxId: string }).sandboxId;
  const ran = await client.callTool({ name: 'run_command', arguments: { sandboxId: id, command: 'echo over-stdio' } });
  assert.match((ran.content as Array<{ text: string }>)[0].text, /^exit code 0\nstdout:\nover-stdio/);
  assert.equal(api.requests.at(-1)!.headers['x-api-key'], 'key-mcp-cli');
  const closing = Date.now();
  await client.close();
  // the client signals a child still running 2 s after it closed its stdin
  assert.ok(Date.now() - closing < 1_900, `svc mcp ended on its own when its stdin closed; stderr: ${stderr}`);
  assert.throws(() => process.kill(pid, 0), /ESRCH/);
});
