/**
 * A sandbox with its own SOCKS5 proxy (network.egressProxy): the destinations it asks that proxy
 * for are on the proxy's side of the world, so the host's loopback and pools are the proxy's
 * business; but the cloud's metadata service (link-local) and the platform's listed endpoints
 * and hosts are refused there too, for requests (exchange-gate.ts) and TCP tunnels
 * (tcp-tunnel.ts), with nothing dialled.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, test } from 'node:test';
import { silentLogger } from '@svc/common';
import type { AuditRecord } from './audit-log.ts';
import { ExchangeGate, type Verdict } from './exchange-gate.ts';
import { PlaceholderResolver } from './placeholders.ts';
import { PlatformGuard } from './platform-guard.ts';
import { PolicyStore } from './policy-store.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';
import type { DialTarget, ProxyVia } from './proxy-via.ts';
import { createTcpTunnelServer } from './tcp-tunnel.ts';
import { Upstreams } from './upstream.ts';

const SANDBOX = '127.0.0.1';
const OWN_PROXY: ProxyVia = { kind: 'socks5', host: '203.0.113.7', port: 1080, fromSandbox: true };
/** The master's list: the database on another host of the platform, and the platform's own network. */
const guard = new PlatformGuard({ sandboxPool: '10.250.0.0/16' }, async () => ({ endpoints: [{ ip: '192.0.2.10', port: 5432 }], pools: [], networks: ['198.51.100.0/28'] }), silentLogger());
await guard.refresh();
const store = new PolicyStore();
store.put({ sandboxId: 'sbx', address: SANDBOX, rules: [], fallback: { allowInternetAccess: true, allowOut: [], denyOut: [] }, tunnel: { address: '203.0.113.7:1080' } });
store.markReady();
const upstreams = new Upstreams({ connectTimeoutMs: 1_000, ioTimeoutMs: 1_000 });
after(() => upstreams.close());

test('a request through the sandbox\'s own proxy: link-local and the platform\'s endpoints and hosts are refused; loopback and the pools are the proxy\'s', async () => {
  const records: AuditRecord[] = [];
  const deps: ProxyDeps = { store, placeholders: new PlaceholderResolver(undefined), audit: { write: (r) => records.push(r) }, upstreams, logger: silentLogger(), viaFor: () => OWN_PROXY, platform: guard };
  const conn: ConnectionFacts = { scheme: 'http', sandboxIp: SANDBOX, tlsVersion: '', cipher: '' };
  const decide = async (host: string, port: number) => await new ExchangeGate(deps, conn, 'GET', '/').decide({ scheme: 'http', port, host, method: 'GET', path: '/' }) as Verdict;
  for (const [host, port, why] of [
    ['169.254.169.254', 80, 'is link-local (cloud metadata services)'],
    ['192.0.2.10', 5432, 'port 5432 is one of the platform\'s own components'],
    ['198.51.100.3', 22, 'is one of the platform\'s own hosts (master.platform_networks)'],
  ] as const) {
    const v = await decide(host, port);
    assert.equal(v.allowed, false, `${host}:${port}`);
    assert.match((v as Extract<Verdict, { allowed: false }>).message, new RegExp(`is the platform's own: ${host.replace(/\./g, '\\.')} ${why.replace(/[()]/g, '\\$&')}`));
  }
  assert.equal(records.filter((r) => 'reason' in r && r.reason === 'platform_address').length, 3);
  for (const [host, port] of [['127.0.0.1', 5432], ['10.250.0.9', 80], ['192.0.2.10', 443]] as const) {
    assert.equal((await decide(host, port)).allowed, true, `${host}:${port} is on the proxy's side`);
  }
});

test('a TCP tunnel through the sandbox\'s own proxy to the metadata service or a platform endpoint fails closed, never dialled', async () => {
  const records: AuditRecord[] = [];
  const dialled: DialTarget[] = [];
  let destination = { ip: '169.254.169.254', port: 80 };
  const server = createTcpTunnelServer({
    store, audit: { write: (r) => records.push(r) }, logger: silentLogger(), platform: guard, ioTimeoutMs: 1_000,
    originalDestination: async () => destination, viaFor: () => OWN_PROXY,
    dial: async (target) => { dialled.push(target); throw new Error('the test dials nothing'); },
  });
  const port = await new Promise<number>((r) => server.server.listen(0, SANDBOX, () => r((server.server.address() as net.AddressInfo).port)));
  const connect = () => new Promise<void>((resolve) => {
    const s = net.connect({ port, host: SANDBOX }, () => s.write('x'));
    s.on('error', () => { /* the reset is the answer */ });
    s.on('close', () => resolve());
  });
  try {
    await connect();
    destination = { ip: '192.0.2.10', port: 5432 };
    await connect();
    assert.deepEqual(dialled, [], 'nothing was dialled');
    const reasons = records.map((r) => (r as { reason?: string }).reason);
    assert.match(String(reasons[0]), /^169\.254\.169\.254:80 is the platform's own: 169\.254\.169\.254 is link-local/);
    assert.match(String(reasons[1]), /^192\.0\.2\.10:5432 is the platform's own: 192\.0\.2\.10 port 5432 is one of the platform's own components/);
    destination = { ip: '127.0.0.1', port: 5432 };
    await connect();
    assert.deepEqual(dialled, [{ ip: '127.0.0.1', port: 5432 }], 'loopback on the proxy\'s side is the proxy\'s own host: dialled through it');
  } finally {
    server.destroyAll();
    server.server.close();
  }
});
