import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig, SvcError } from '@svc/common';
import { platformEndpoints } from './platform-endpoints.ts';
import { WebhookTargets } from './webhook-target.ts';

const keys = (list: Array<{ host: string; port: number }>) => list.map((e) => `${e.host}:${e.port}`);

test('a component listening on every address is taken on each node\'s host too (the control components may run beside a node agent)', async () => {
  const cfg = loadConfig({ env: {} });
  cfg.master.listen = '0.0.0.0:8089';
  cfg.lifecycle.listen = '0.0.0.0:8083';
  cfg.lifecycle.replicas = 2;
  cfg.api.listen = '127.0.0.1:3000';
  const list = keys(await platformEndpoints(cfg, async () => ['http://10.0.0.6:8088', 'https://node-b.internal:9000'])());
  for (const host of ['10.0.0.6', 'node-b.internal']) {
    for (const port of [8089, 8083, 8084]) assert.ok(list.includes(`${host}:${port}`), `${host}:${port} missing from ${list.join(' ')}`);
  }
  assert.ok(list.includes('10.0.0.6:8088') && list.includes('node-b.internal:9000'), 'the node agents themselves');
  // A component bound to one address is there alone: the nodes do not get its port.
  assert.ok(!list.includes('10.0.0.6:3000'), list.join(' '));
});

test('with every listen on loopback (svc up), the nodes add their own agents\' ports alone', async () => {
  const cfg = loadConfig({ env: {} });
  const list = await platformEndpoints(cfg, async () => ['http://10.0.0.6:8088'])();
  assert.deepEqual(list.filter((e) => e.host === '10.0.0.6'), [{ host: '10.0.0.6', port: 8088 }]);
});

test('the operator\'s egress.upstream_proxy is the platform\'s: a sandbox that names it as its own egressProxy gets a 400', async () => {
  const cfg = loadConfig({ env: {} });
  cfg.egress.upstream_proxy = 'socks5://user:pw@10.0.0.5:1080';
  const platform = platformEndpoints(cfg, async () => []);
  assert.ok(keys(await platform()).includes('10.0.0.5:1080'), 'listed by host and port');
  // The check the master runs on network.egressProxy (sandboxes/egress.ts), by address and by a name for it.
  const targets = new WebhookTargets({ platform, pools: ['10.200.0.0/16'], allowCidrs: [], resolve: async (h) => h === 'corp-proxy.example' ? ['10.0.0.5'] : ['93.184.216.34'] });
  for (const host of ['10.0.0.5', 'corp-proxy.example']) {
    await assert.rejects(targets.checkEndpoint(host, 1080, 'network.egressProxy'), (err: unknown) => {
      assert.ok(err instanceof SvcError && err.status === 400, host);
      assert.match(err.message, /^network\.egressProxy .*:1080 is not allowed: 10\.0\.0\.5.* port 1080 is one of the platform's own components$/);
      return true;
    });
  }
  await targets.checkEndpoint('10.0.0.5', 1081, 'network.egressProxy');
  // An HTTP CONNECT proxy too.
  cfg.egress.upstream_proxy = 'http://proxy.corp.example:3128';
  assert.ok(keys(await platformEndpoints(cfg, async () => [])()).includes('proxy.corp.example:3128'));
});
