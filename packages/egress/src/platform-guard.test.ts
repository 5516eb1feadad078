/**
 * What the egress proxy never connects to for a sandbox (platform-guard.ts, docs/egress.md "What
 * the proxy never connects to"): the guard's refusals, then in-process proxies whose sandboxes try
 * to reach the host's loopback through every way in (a rule by address, a rule by a name that
 * resolves there, the by-address fallback, CONNECT, their own SOCKS5 proxy's name, the operator's
 * proxy), each refused with nothing contacted.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@svc/common';
import type { PlatformAddresses, SandboxEgressPolicy } from '@svc/contracts/egress';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';
import { PlatformGuard } from './platform-guard.ts';
import { readAuditRecords } from './testing/audit-file.ts';

const POOL = '10.250.0.0/16';

test('the guard: loopback, this host, link-local and the pools on any port; the master\'s endpoints on their port; the last list stands while the master fails', async () => {
  let list: PlatformAddresses | Error = { endpoints: [{ ip: '192.0.2.80', port: 8089 }], pools: ['10.251.0.0/16'], networks: ['198.51.100.0/28'] };
  const guard = new PlatformGuard({ sandboxPool: POOL }, async () => { if (list instanceof Error) throw list; return list; }, silentLogger());
  await guard.refresh();
  const hostAddress = Object.values(networkInterfaces()).flatMap((l) => l ?? []).find((i) => i.family === 'IPv4' && !i.internal)?.address;
  const cases: Array<[string, number, string | undefined]> = [
    ['127.0.0.1', 8089, 'is a loopback address (the host itself)'],
    ['127.255.0.9', 22, 'is a loopback address (the host itself)'],
    ['0.0.0.0', 80, 'means the host itself'],
    ['169.254.169.254', 80, 'is link-local (cloud metadata services)'],
    ['10.250.3.4', 49983, 'is in the sandbox address pool'],
    ['10.251.0.1', 80, 'is in the sandbox address pool'],
    ['192.0.2.80', 8089, 'port 8089 is one of the platform\'s own components'],
    ['192.0.2.80', 443, undefined],
    ['198.51.100.9', 443, 'is one of the platform\'s own hosts (master.platform_networks)'],
    ['198.51.100.16', 443, undefined],
    ['10.249.255.255', 80, undefined],
    ['93.184.216.34', 443, undefined],
    ...(hostAddress ? [[hostAddress, 443, 'is an address of the host itself']] as Array<[string, number, string]> : []),
  ];
  for (const [ip, port, why] of cases) assert.equal(guard.refusal(ip, port), why, `${ip}:${port}`);

  list = new Error('connect ECONNREFUSED');
  await guard.refresh();
  assert.equal(guard.refusal('192.0.2.80', 8089), 'port 8089 is one of the platform\'s own components', 'the last list stands');
  list = { endpoints: [], pools: [] };
  await guard.refresh();
  assert.equal(guard.refusal('192.0.2.80', 8089), undefined, 'a new list replaces it');
  assert.equal(guard.refusal('10.251.0.1', 80), undefined);
  assert.equal(guard.refusal('10.250.0.1', 80), 'is in the sandbox address pool', 'the configured pool always holds');
});

// ---- proxies whose sandboxes aim at the host ----

let dir: string;
let proxy: EgressProxy;
let operatorProxied: EgressProxy;
/** A service on the host's loopback that no sandbox may reach: the master's API, say. */
let internal: http.Server;
let internalPort: number;
/** Where the sandbox's own SOCKS5 proxy name resolves: loopback, so never dialled. */
let socks: net.Server;
/** The operator's HTTP CONNECT proxy. */
let operator: net.Server;
const contacted = { internal: 0, socks: 0, operator: 0 };

function listen(server: net.Server, host: string): Promise<number> {
  return new Promise((r) => server.listen(0, host, () => r((server.address() as net.AddressInfo).port)));
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-platform-'));
  internal = http.createServer((_req, res) => { res.end('the platform\'s own API'); });
  internal.on('connection', () => { contacted.internal++; });
  internalPort = await listen(internal, '127.0.0.1');
  socks = net.createServer((c) => { contacted.socks++; c.destroy(); });
  const socksPort = await listen(socks, '127.0.0.3');
  operator = net.createServer((c) => { contacted.operator++; c.destroy(); });
  const operatorPort = await listen(operator, '127.0.0.1');
  const http1 = { scheme: 'http' as const, port: internalPort };
  const policies: SandboxEgressPolicy[] = [
    {
      // The sandbox at 127.0.0.1: rules aimed at the host, and E2B's lists allowing loopback.
      sandboxId: 'sbx-rules', address: '127.0.0.1',
      rules: [
        { name: 'by-address', match: { ...http1, host: '127.0.0.1' }, action: { allow: true } },
        { name: 'by-name', match: { ...http1, host: 'internal.rebind.test' }, action: { allow: true } },
        { name: 'connect', match: { scheme: 'https', port: internalPort, host: 'tunnel.rebind.test' }, action: { allow: true } },
        { name: 'inject', match: { ...http1, host: 'inject.rebind.test' }, action: { allow: true, inject: [{ header: 'Authorization', format: 'Bearer ${SECRET}', secret: 'sk-never-resolved' }] } },
      ],
      fallback: { allowInternetAccess: false, allowOut: ['127.0.0.0/8'], denyOut: [] },
    },
    // The sandbox at 127.0.0.2: its own SOCKS5 proxy, by a name that resolves to loopback.
    { sandboxId: 'sbx-socks', address: '127.0.0.2', rules: [], tunnel: { address: `socks.rebind.test:${socksPort}` } },
  ];
  const common = {
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, tunnelPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: 't',
    resolve: { 'internal.rebind.test': '127.0.0.1', 'tunnel.rebind.test': '127.0.0.1', 'fallback.rebind.test': '127.0.0.1', 'inject.rebind.test': '127.0.0.1', 'socks.rebind.test': '127.0.0.3' },
    platformGuard: { sandboxPool: POOL },
    platformSource: async () => ({ endpoints: [], pools: [] }),
    originalDestination: async () => ({ ip: '127.0.0.1', port: internalPort }),
    logger: silentLogger(),
  };
  proxy = await startEgressProxy({ ...common, caDir: join(dir, 'ca'), auditLogPath: join(dir, 'a.jsonl'), policySource: async () => policies });
  operatorProxied = await startEgressProxy({
    ...common, caDir: join(dir, 'ca'), auditLogPath: join(dir, 'b.jsonl'),
    upstreamProxy: { kind: 'http', host: '127.0.0.1', port: operatorPort },
    policySource: async () => [{ sandboxId: 'sbx-operator', address: '127.0.0.1', rules: [] }],
  });
  for (const p of [proxy, operatorProxied]) while (!p.ready()) await new Promise((r) => setTimeout(r, 10));
});

after(async () => {
  await Promise.all([proxy?.close(), operatorProxied?.close()]);
  for (const s of [internal, socks, operator]) { if (s instanceof http.Server) s.closeAllConnections(); s?.close(); }
  await rm(dir, { recursive: true, force: true });
});

/** Raw bytes to a listener of the proxy from a sandbox address; everything it answered. */
function exchange(port: number, localAddress: string, text: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress });
    let got = '';
    s.on('data', (b: Buffer) => { got += b.toString(); });
    s.on('error', () => resolve(got));
    s.on('close', () => resolve(got));
    if (text) s.write(text);
    setTimeout(() => s.end(), 1_000).unref();
  });
}

async function records(file: string, n: number, match: (r: Record<string, unknown>) => boolean): Promise<Array<Record<string, unknown>>> {
  let found: Array<Record<string, unknown>> = [];
  for (let i = 0; i < 150 && found.length < n; i++) {
    found = (await readAuditRecords(join(dir, file))).filter(match);
    if (found.length < n) await new Promise((r) => setTimeout(r, 20));
  }
  return found;
}

test('rules and E2B\'s lists aimed at the host: a 403 naming why, a platform_address event, and the host\'s service never contacted', async () => {
  const get = (host: string) => exchange(proxy.httpPort, '127.0.0.1', `GET /v1/sandboxes HTTP/1.1\r\nHost: ${host}:${internalPort}\r\nConnection: close\r\n\r\n`);
  const byAddress = await get('127.0.0.1');
  assert.match(byAddress, /^HTTP\/1\.1 403 /);
  assert.match(byAddress, /egress denied: 127\.0\.0\.1:\d+ is the platform's own: 127\.0\.0\.1 is a loopback address \(the host itself\); the egress proxy never connects there for a sandbox, whatever the rules say/);
  const byName = await get('internal.rebind.test');
  assert.match(byName, /^HTTP\/1\.1 403 /);
  assert.match(byName, /internal\.rebind\.test \(127\.0\.0\.1:\d+\) is the platform's own/);
  const byFallback = await get('fallback.rebind.test');
  assert.match(byFallback, /^HTTP\/1\.1 403 /, 'allowOut naming loopback does not open it either');
  const connect = await exchange(proxy.httpPort, '127.0.0.1', `CONNECT tunnel.rebind.test:${internalPort} HTTP/1.1\r\nHost: tunnel.rebind.test:${internalPort}\r\n\r\n`);
  assert.match(connect, /^HTTP\/1\.1 403 /);
  const inject = await get('inject.rebind.test');
  assert.match(inject, /^HTTP\/1\.1 403 /);
  assert.equal(contacted.internal, 0, 'the host\'s service saw no connection');

  const events = await records('a.jsonl', 5, (r) => r.type === 'security_event' && r.reason === 'platform_address');
  assert.deepEqual(events.map((e) => e.rule), ['by-address', 'by-name', '', 'connect', 'inject']);
  assert.equal((await readAuditRecords(join(dir, 'a.jsonl'))).filter((r) => r.reason === 'inject_fired').length, 0, 'refused before the inject: it never fired');
  assert.match(String(events[1]!.detail), /^internal\.rebind\.test \(127\.0\.0\.1:\d+\): 127\.0\.0\.1 is a loopback address \(the host itself\); nothing was contacted$/);
  const requests = await records('a.jsonl', 5, (r) => r.type === undefined && r.status === 403);
  assert.ok(requests.every((r) => r.dst_ip === ''), 'no upstream address: none was contacted');
});

test('a sandbox\'s own SOCKS5 proxy whose name resolves to the host is never dialled; the tunnel fails closed', async () => {
  await exchange(proxy.tunnelPort, '127.0.0.2', 'hello');
  const [rec] = await records('a.jsonl', 1, (r) => r.type === 'tcp');
  assert.equal(rec!.status, 'failed');
  assert.match(String(rec!.reason), /^the SOCKS5 proxy socks\.rebind\.test:\d+ is refused: 127\.0\.0\.3 is a loopback address \(the host itself\); it was not contacted$/);
  assert.equal(contacted.socks, 0);
});

test('through the operator\'s proxy a connection to the host is refused before the proxy is asked', async () => {
  await exchange(operatorProxied.tunnelPort, '127.0.0.1', 'hello');
  const [rec] = await records('b.jsonl', 1, (r) => r.type === 'tcp');
  assert.equal(rec!.status, 'failed');
  assert.match(String(rec!.reason), /^127\.0\.0\.1:\d+ is the platform's own: 127\.0\.0\.1 is a loopback address \(the host itself\); not contacted$/);
  assert.equal(contacted.operator, 0);
  assert.equal(contacted.internal, 0);
});

test('until the master\'s list is first read the proxy is not ready: every request and tunnel refused, then the list is asked for every second', async () => {
  let answers = false;
  let asked = 0;
  const source = async (): Promise<PlatformAddresses> => {
    asked++;
    if (!answers) throw new Error('connect ECONNREFUSED (the master is not up yet)');
    return { endpoints: [], pools: [] };
  };
  assert.equal(new PlatformGuard({ sandboxPool: POOL }, undefined, silentLogger()).listed, true, 'without a master there is no list to wait for');
  const waiting = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, tunnelPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: 't',
    caDir: join(dir, 'ca'), auditLogPath: join(dir, 'c.jsonl'),
    policySource: async () => [{ sandboxId: 'sbx-early', address: '127.0.0.1', rules: [{ name: 'host', match: { scheme: 'http', port: internalPort, host: '127.0.0.1' }, action: { allow: true } }] }],
    platformGuard: { sandboxPool: POOL }, platformSource: source,
    originalDestination: async () => ({ ip: '127.0.0.1', port: internalPort }),
    logger: silentLogger(),
  });
  try {
    while (!waiting.ready()) await new Promise((r) => setTimeout(r, 10));
    const get = () => exchange(waiting.httpPort, '127.0.0.1', `GET / HTTP/1.1\r\nHost: 127.0.0.1:${internalPort}\r\nConnection: close\r\n\r\n`);
    const early = await get();
    assert.match(early, /^HTTP\/1\.1 403 /);
    assert.match(early, /egress denied: the proxy has not read the platform's addresses from the master yet \(not ready\)/);
    await exchange(waiting.tunnelPort, '127.0.0.1', 'hello');
    const [tcp] = await records('c.jsonl', 1, (r) => r.type === 'tcp');
    assert.equal(tcp!.reason, 'the proxy has not read the platform\'s addresses from the master yet (not ready)');
    const [event] = await records('c.jsonl', 1, (r) => r.type === 'security_event' && r.reason === 'not_ready');
    assert.match(String(event!.detail), /list of the platform's addresses is not read yet/);

    answers = true;
    const before = asked;
    for (let i = 0; i < 40 && asked === before; i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(asked > before, 'asked again within seconds, not at the next 30 s refresh');
    const later = await get();
    assert.match(later, /is the platform's own: 127\.0\.0\.1 is a loopback address/, 'read: the request is decided, and the guard refuses the host as always');
    assert.equal(contacted.internal, 0, 'nothing reached the host\'s service while the proxy waited');
  } finally {
    await waiting.close();
  }
});
