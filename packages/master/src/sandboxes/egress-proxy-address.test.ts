/**
 * The master's dial-time check of a sandbox's SOCKS5 proxy address (MASTER_EGRESS_ROUTES.
 * checkProxyAddress): the create's rule again, for the address a proxy's name resolves to when the
 * egress proxy dials it (DNS rebinding), called through the contract's own client.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { SvcError } from '@svc/common';
import { ProxyAddressCheckClient } from '@svc/contracts/egress-routes';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '../testing/master-over-fake-node.ts';

const TOKEN = 'egress-admin-token-for-the-check';
let h: MasterOverFakeNode;
before(async () => { h = await startMasterOverFakeNode((cfg) => { cfg.egress.admin_token = TOKEN; }); });
after(async () => { await h?.close(); });

async function refusal(client: ProxyAddressCheckClient, ip: string, port: number): Promise<SvcError> {
  const err = await client.check(ip, port).then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof SvcError, `${ip}:${port} should be refused, got ${String(err)}`);
  return err;
}

test('an address outside the platform is allowed; the platform\'s own endpoints and the sandbox pool are a 400 saying why', async () => {
  const client = new ProxyAddressCheckClient(h.master.url, TOKEN);
  await client.check('192.0.2.10', 1080);
  await client.check('127.0.0.1', 1080);
  const masterPort = Number(new URL(h.master.url).port);
  const own = await refusal(client, '127.0.0.1', masterPort);
  assert.equal(own.status, 400);
  assert.match(own.message, new RegExp(`^network\\.egressProxy 127\\.0\\.0\\.1:${masterPort} is not allowed: 127\\.0\\.0\\.1 port ${masterPort} is one of the platform's own components$`));
  const poolAddress = h.cfg.node_agent.address_pool.split('/')[0]!.replace(/\.\d+$/, '.7');
  const pool = await refusal(client, poolAddress, 1080);
  assert.equal(pool.status, 400);
  assert.match(pool.message, /is in the sandbox address pool$/);
  const unspecified = await refusal(client, '0.0.0.0', 1080);
  assert.match(unspecified.message, /it means this host/);
});

test('the check takes the egress proxy\'s token only, and an address that is no IPv4 address and port is a 400', async () => {
  const stranger = await refusal(new ProxyAddressCheckClient(h.master.url, 'not-the-token'), '192.0.2.10', 1080);
  assert.equal(stranger.status, 403);
  const none = await refusal(new ProxyAddressCheckClient(h.master.url, ''), '192.0.2.10', 1080);
  assert.equal(none.status, 403);
  const client = new ProxyAddressCheckClient(h.master.url, TOKEN);
  for (const [ip, port, message] of [
    ['socks.example.com', 1080, /^ip must match pattern/],
    ['::1', 1080, /^ip must match pattern/],
    ['10.0.0.256', 1080, /^ip must match pattern/],
    ['192.0.2.10', 0, /^port must be >= 1$/],
    ['192.0.2.10', 65536, /^port must be <= 65535$/],
    ['192.0.2.10', 1.5, /^port must be integer$/],
  ] as Array<[string, number, RegExp]>) {
    const err = await refusal(client, ip, port);
    assert.equal(err.status, 400, `${ip}:${port}`);
    assert.match(err.message, message, `${ip}:${port}`);
  }
});
