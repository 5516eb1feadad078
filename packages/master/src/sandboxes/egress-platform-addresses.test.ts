/**
 * The master's list of the platform's addresses for the egress proxy
 * (MASTER_EGRESS_ROUTES.platformAddresses), called through the contract's own client: what the
 * proxy never connects to for a sandbox beside what it refuses by itself.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { SvcError } from '@svc/common';
import { EgressPolicySource } from '@svc/contracts/egress-routes';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '../testing/master-over-fake-node.ts';

const TOKEN = 'egress-admin-token-for-the-list';
let h: MasterOverFakeNode;
before(async () => {
  h = await startMasterOverFakeNode((cfg) => {
    cfg.egress.admin_token = TOKEN;
    // A database on another host, named: the egress proxy gets its address.
    cfg.redis.host = 'redis.cluster.test';
    cfg.redis.port = 6380;
    cfg.egress.resolve = 'redis.cluster.test=192.0.2.44';
  });
});
after(async () => { await h?.close(); });

test('the list: the platform\'s endpoints by address (a name resolved as the egress proxy resolves it), no loopback, and the sandbox pool', async () => {
  const list = await new EgressPolicySource(h.master.url, TOKEN).platformAddresses();
  assert.deepEqual(list.pools, [h.cfg.node_agent.address_pool]);
  const keys = list.endpoints.map((e) => `${e.ip}:${e.port}`);
  assert.ok(keys.includes('192.0.2.44:6380'), keys.join(' '));
  assert.ok(list.endpoints.every((e) => /^\d+\.\d+\.\d+\.\d+$/.test(e.ip) && !e.ip.startsWith('127.')), keys.join(' '));
});

test('the list takes the egress proxy\'s token only', async () => {
  for (const token of ['not-the-token', '']) {
    const err = await new EgressPolicySource(h.master.url, token).platformAddresses().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof SvcError, String(err));
    assert.equal(err.status, 403);
  }
});

test('the node agents read the same list on their internal route, without the egress proxy\'s token', async () => {
  const forNodes = await new MasterInternalClient(h.master.url).platformAddresses();
  assert.deepEqual(forNodes, await new EgressPolicySource(h.master.url, TOKEN).platformAddresses());
  assert.ok(forNodes.endpoints.some((e) => e.ip === '192.0.2.44' && e.port === 6380));
});
