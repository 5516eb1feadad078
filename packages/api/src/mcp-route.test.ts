/**
 * /mcp on the real gateway over a real master (fake node): the API's own 401 without a key, the
 * tools' calls going back through the API with the caller's key (so a team sees its own sandboxes
 * only), a session bound to the team that opened it, DELETE ending it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { silentLogger } from '@svc/common';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { startApiGateway } from './index.ts';

const ADMIN = 'e2b_00000000000000000000000000000000000000ad';
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };

interface ToolResult { isError?: boolean; content: Array<{ type: string; text?: string }>; structuredContent?: Record<string, unknown> }
const textOf = (r: ToolResult) => r.content.map((c) => c.text ?? '').join('\n');

test('/mcp: the API\'s key check, team-scoped tools, sessions bound to their team', async () => {
  const m = await startMasterOverFakeNode((c) => { c.api.api_key = ADMIN; });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  const clients: Client[] = [];
  const connect = async (key: string) => {
    const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
    const client = new Client({ name: 'api-test', version: '1.0.0' });
    await client.connect(transport);
    clients.push(client);
    return { transport, call: async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as ToolResult };
  };
  try {
    const none = await fetch(`${gw.url}/mcp`, { method: 'POST', headers: MCP_HEADERS, body: JSON.stringify(INIT) });
    assert.equal(none.status, 401);
    assert.match(((await none.json()) as { message: string }).message, /missing API key/);
    const wrong = await fetch(`${gw.url}/mcp`, { method: 'POST', headers: { ...MCP_HEADERS, 'x-api-key': 'e2b_0000000000000000000000000000000000000bad' }, body: JSON.stringify(INIT) });
    assert.equal(wrong.status, 401);

    const admin = await connect(ADMIN);
    const created = await admin.call('create_sandbox', { metadata: { who: 'admin' } });
    assert.ok(!created.isError, textOf(created));
    const id = created.structuredContent!.sandboxId as string;
    assert.match(textOf(await admin.call('list_sandboxes', {})), new RegExp(id));

    const team = await fetch(`${gw.url}/svc/teams`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': ADMIN }, body: JSON.stringify({ name: 'mcp-team' }) });
    const teamKey = ((await team.json()) as { apiKey: string }).apiKey;
    const other = await connect(teamKey);
    assert.doesNotMatch(textOf(await other.call('list_sandboxes', {})), new RegExp(id), 'another team does not see it');
    const kill = await other.call('kill_sandbox', { sandboxId: id });
    assert.equal(kill.isError, true);
    assert.match(textOf(kill), new RegExp(`no sandbox ${id} in your team`));
    const theirs = await fetch(`${gw.url}/mcp`, {
      method: 'POST', headers: { ...MCP_HEADERS, 'x-api-key': teamKey, 'mcp-session-id': admin.transport.sessionId! },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    assert.equal(theirs.status, 404, 'the admin\'s session is not the team\'s');

    const sessionId = admin.transport.sessionId!;
    await admin.transport.terminateSession();
    const ended = await fetch(`${gw.url}/mcp`, {
      method: 'POST', headers: { ...MCP_HEADERS, 'x-api-key': ADMIN, 'mcp-session-id': sessionId }, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
    });
    assert.equal(ended.status, 404, 'DELETE ended it');
    assert.ok(!(await other.call('list_sandboxes', {})).isError, 'the other session goes on');
  } finally {
    for (const c of clients) await c.close();
    await gw.close();
    await m.close();
  }
});
