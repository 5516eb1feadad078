/**
 * The check of a webhook's URL (webhook-target.ts): its form, the platform's own endpoints, the
 * sandbox pools and events.webhook_allow_cidrs. Host names resolve through a stub, so the test
 * decides what a name stands for (DNS rebinding included); the platform is a fixed list.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { SvcError } from '@svc/common';
import { parseWebhookUrl } from '@svc/contracts/events';
import { WebhookTargets, type Endpoint, type WebhookTargetRules } from './webhook-target.ts';

const MASTER_PORT = 7100;
/** A component listening on every address of this host. */
const WILDCARD_PORT = 7200;
/** A component configured as localhost. */
const LOCALHOST_PORT = 7300;
const POOL = '10.200.0.0/16';

const PLATFORM: Endpoint[] = [
  { host: '127.0.0.1', port: MASTER_PORT },
  { host: '0.0.0.0', port: WILDCARD_PORT },
  { host: 'localhost', port: LOCALHOST_PORT },
];

/** What each name stands for; a name not here does not resolve. */
const NAMES: Record<string, string[]> = {
  'public.example': ['93.184.216.34'],
  'pool.example': ['10.200.4.7'],
  'rebind.example': ['93.184.216.34', '10.200.0.9'],
  'mapped.example': ['::ffff:127.0.0.1'],
  'mapped-pool.example': ['::ffff:10.200.1.1'],
  'lan.example': ['192.168.1.1'],
  'empty.example': [],
};

async function resolve(host: string): Promise<string[]> {
  const found = NAMES[host];
  if (!found) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
  return found;
}

function targets(over: Partial<WebhookTargetRules> = {}): WebhookTargets {
  return new WebhookTargets({ platform: async () => PLATFORM, pools: [POOL], allowCidrs: [], resolve, ...over });
}

/** The check refuses the URL with a 400 whose message matches `why`. */
async function refused(t: WebhookTargets, url: string, why: RegExp): Promise<void> {
  await assert.rejects(t.check(url), (err: unknown) => {
    assert.ok(err instanceof SvcError, `${url}: a SvcError, not ${String(err)}`);
    assert.equal(err.status, 400, url);
    assert.match(err.message, why, url);
    return true;
  }, `${url} was allowed`);
}

async function allowed(t: WebhookTargets, url: string): Promise<string[]> {
  const r = await t.check(url);
  assert.ok(r.url instanceof URL, `${url}: the parsed URL`);
  return r.addresses;
}

test('the form: http or https only, no credentials, a URL at all', async () => {
  const t = targets();
  await refused(t, 'ftp://public.example/hook', /must be http or https, not ftp/);
  await refused(t, 'javascript:alert(1)', /must be http or https, not javascript/);
  await refused(t, 'file:///etc/passwd', /must be http or https, not file/);
  await refused(t, 'https://user:password@public.example/hook', /must not carry a user or password/);
  await refused(t, 'https://user@public.example/hook', /must not carry a user or password/);
  await refused(t, 'not a url', /is not a URL: "not a url"/);
  await refused(t, '', /is not a URL/);
  // The same checks, for the routes, without resolving anything.
  assert.throws(() => parseWebhookUrl('ftp://x/'), (e: unknown) => e instanceof SvcError && e.status === 400);
  assert.equal(parseWebhookUrl('https://public.example/h?x=1').hostname, 'public.example');
  assert.deepEqual(await allowed(t, 'https://public.example/hook'), ['93.184.216.34']);
  assert.deepEqual(await allowed(t, 'http://93.184.216.34:8080/hook'), ['93.184.216.34']);
});

test('the platform\'s own endpoints: the exact address and port, a wildcard listen, localhost', async () => {
  const t = targets();
  await refused(t, `http://127.0.0.1:${MASTER_PORT}/hook`, new RegExp(`127\\.0\\.0\\.1 port ${MASTER_PORT} is one of the platform's own components`));
  assert.deepEqual(await allowed(t, `http://127.0.0.1:${MASTER_PORT + 1}/hook`), ['127.0.0.1'], 'another port of the same address is the operator\'s');
  assert.deepEqual(await allowed(t, 'http://127.0.0.1/hook'), ['127.0.0.1'], 'the default port 80 is no component here');
  // Listening on 0.0.0.0: every address of this host answers on that port.
  await refused(t, `http://127.0.0.1:${WILDCARD_PORT}/`, /one of the platform's own components/);
  await refused(t, `http://127.0.0.5:${WILDCARD_PORT}/`, /127\.0\.0\.5 port 7200/);
  await refused(t, `http://[::1]:${WILDCARD_PORT}/`, /one of the platform's own components/);
  assert.deepEqual(await allowed(t, `http://192.0.2.10:${WILDCARD_PORT}/`), ['192.0.2.10'], 'an address of another host on that port is not this host\'s component');
  // Configured as localhost: any loopback address on that port.
  await refused(t, `http://127.0.0.1:${LOCALHOST_PORT}/`, /one of the platform's own components/);
  await refused(t, `http://127.0.0.9:${LOCALHOST_PORT}/`, /one of the platform's own components/);
  await refused(t, `http://[::1]:${LOCALHOST_PORT}/`, /one of the platform's own components/);
  assert.deepEqual(await allowed(t, `http://127.0.0.1:${LOCALHOST_PORT + 1}/`), ['127.0.0.1']);
  // The platform list is read at each check: a node registered later is guarded from then on.
  let nodes: Endpoint[] = [];
  const live = targets({ platform: async () => nodes });
  await allowed(live, 'http://192.0.2.20:5007/');
  nodes = [{ host: '192.0.2.20', port: 5007 }];
  await refused(live, 'http://192.0.2.20:5007/', /one of the platform's own components/);
});

test('the sandbox pool: any port, by address or by a name resolving into it (DNS rebinding)', async () => {
  const t = targets();
  for (const url of ['http://10.200.3.4/', 'http://10.200.3.4:8080/x', 'https://10.200.0.1/', 'http://10.200.255.254:49983/']) {
    await refused(t, url, /is in the sandbox address pool/);
  }
  await refused(t, 'http://pool.example/hook', /10\.200\.4\.7 \(pool\.example\) is in the sandbox address pool/);
  // One public address does not make the name safe: a connection could go to the other one.
  await refused(t, 'https://rebind.example/hook', /10\.200\.0\.9 \(rebind\.example\) is in the sandbox address pool/);
  assert.deepEqual(await allowed(t, 'http://10.201.0.1/'), ['10.201.0.1'], 'a private address outside the pool is allowed');
  assert.deepEqual(await allowed(t, 'http://10.199.255.255/'), ['10.199.255.255']);
  // Several pools, and an empty entry (an unset node_agent.address_pool) ignored.
  const two = targets({ pools: [POOL, '172.30.0.0/24', ''] });
  await refused(two, 'http://172.30.0.200/', /sandbox address pool/);
  await allowed(two, 'http://172.30.1.1/');
});

test('::ffff:127.0.0.1 from the resolver is 127.0.0.1, and the address kept is the plain one', async () => {
  const t = targets();
  await refused(t, `http://mapped.example:${MASTER_PORT}/`, /127\.0\.0\.1 \(mapped\.example\) port 7100 is one of the platform's own components/);
  await refused(t, 'http://mapped-pool.example/', /10\.200\.1\.1 \(mapped-pool\.example\) is in the sandbox address pool/);
  assert.deepEqual(await allowed(t, `http://mapped.example:${MASTER_PORT + 1}/`), ['127.0.0.1']);
  // A platform endpoint written mapped is the plain address too.
  const mappedPlatform = targets({ platform: async () => [{ host: '::ffff:127.0.0.1', port: MASTER_PORT }] });
  await refused(mappedPlatform, `http://127.0.0.1:${MASTER_PORT}/`, /one of the platform's own components/);
});

test('a v4-mapped IPv6 literal in the URL ([::ffff:127.0.0.1]) is checked like 127.0.0.1', async () => {
  // WHATWG URL writes [::ffff:127.0.0.1] as [::ffff:7f00:1], and a connection to it (a dual-stack
  // socket) reaches 127.0.0.1:PORT: both forms are mapped back before any check.
  const t = targets();
  await refused(t, `http://[::ffff:127.0.0.1]:${MASTER_PORT}/`, /one of the platform's own components/);
  await refused(t, 'http://[::ffff:10.200.0.5]/', /sandbox address pool/);
});

test('http://0.0.0.0:PORT, which reaches a component bound to 127.0.0.1:PORT, is refused', async () => {
  // On Linux a connection to 0.0.0.0 goes to the local host: a listener on 127.0.0.1 answers it.
  const t = targets();
  await refused(t, `http://0.0.0.0:${MASTER_PORT}/`, /it means this host/);
  await refused(t, `http://0:${LOCALHOST_PORT}/`, /it means this host/);
});

test('a platform endpoint configured by host name (redis:6379) is refused, by its name and by its address', async () => {
  // platformEndpoints() keeps names as written (redis.host, mysql host, node_agent.addr): the check
  // resolves them too, so the name and the address it stands for are both refused.
  const names: Record<string, string[]> = { redis: ['172.18.0.3'] };
  const t = targets({
    platform: async () => [{ host: 'redis', port: 6379 }],
    resolve: async (h) => names[h] ?? [],
  });
  await refused(t, 'http://redis:6379/', /one of the platform's own components/);
  await refused(t, 'http://172.18.0.3:6379/', /one of the platform's own components/);
});

test('events.webhook_allow_cidrs: every address must be inside one; the pool is refused even inside', async () => {
  const t = targets({ allowCidrs: ['192.168.0.0/16'] });
  await refused(t, 'http://10.1.2.3/hook', /10\.1\.2\.3 is outside events\.webhook_allow_cidrs/);
  await refused(t, 'http://public.example/hook', /93\.184\.216\.34 \(public\.example\) is outside events\.webhook_allow_cidrs/);
  await refused(t, 'http://[2001:db8::1]/hook', /outside events\.webhook_allow_cidrs/);
  assert.deepEqual(await allowed(t, 'http://192.168.1.1/hook'), ['192.168.1.1']);
  assert.deepEqual(await allowed(t, 'https://lan.example/hook'), ['192.168.1.1']);
  const wide = targets({ allowCidrs: ['10.0.0.0/8'] });
  await refused(wide, 'http://10.200.0.1/', /sandbox address pool/);
  await allowed(wide, 'http://10.1.2.3/');
  // The platform's own endpoints stay refused inside an allowed range.
  const lo = targets({ allowCidrs: ['127.0.0.0/8'] });
  await refused(lo, `http://127.0.0.1:${MASTER_PORT}/`, /platform's own components/);
  await allowed(lo, `http://127.0.0.1:${MASTER_PORT + 1}/`);
});

test('a name that does not resolve, or resolves to nothing, is a 400', async () => {
  const t = targets();
  await refused(t, 'https://nowhere.example/hook', /host nowhere\.example does not resolve \(getaddrinfo ENOTFOUND nowhere\.example\)/);
  await refused(t, 'https://empty.example/hook', /host empty\.example does not resolve/);
});

test('a sandbox\'s SOCKS5 proxy (checkEndpoint): the webhook refusals, and loopback and link-local on any port', async () => {
  const t = targets();
  await t.checkEndpoint('93.184.216.34', 1080, 'network.egressProxy');
  await t.checkEndpoint('192.168.1.1', 1080, 'network.egressProxy');
  await t.checkEndpoint('lan.example', 1080, 'network.egressProxy');
  for (const [host, port, why] of [
    ['127.0.0.1', 1080, /^network\.egressProxy 127\.0\.0\.1:1080 is not allowed: 127\.0\.0\.1 is a loopback address \(the host itself\)$/],
    ['127.8.9.10', 22, /is a loopback address/],
    ['mapped.example', 1080, /^network\.egressProxy mapped\.example:1080 is not allowed: 127\.0\.0\.1 \(mapped\.example\) is a loopback address/],
    ['169.254.169.254', 80, /is link-local \(cloud metadata services\)$/],
    ['rebind.example', 1080, /10\.200\.0\.9 \(rebind\.example\) is in the sandbox address pool$/],
    ['127.0.0.1', MASTER_PORT, /port 7100 is one of the platform's own components$/],
  ] as Array<[string, number, RegExp]>) {
    await assert.rejects(t.checkEndpoint(host, port, 'network.egressProxy'), (err: unknown) => {
      assert.ok(err instanceof SvcError && err.status === 400, `${host}:${port}`);
      assert.match(err.message, why, `${host}:${port}`);
      return true;
    }, `${host}:${port} was allowed`);
  }
});

test('the platform\'s addresses for the egress proxy: names resolved, a wildcard as this host\'s addresses, loopback left out, the pools', async () => {
  const t = targets({
    platform: async () => [...PLATFORM, { host: 'redis.internal', port: 6379 }, { host: '192.0.2.5', port: 5432 }, { host: '::1', port: 7400 }],
    resolve: async (host) => (host === 'redis.internal' ? ['::ffff:192.0.2.9', '192.0.2.9'] : resolve(host)),
  });
  const list = await t.platformAddresses();
  assert.deepEqual(list.pools, [POOL]);
  const keys = list.endpoints.map((e) => `${e.ip}:${e.port}`);
  assert.ok(keys.includes('192.0.2.9:6379'), 'a name by its address, once');
  assert.equal(keys.filter((k) => k === '192.0.2.9:6379').length, 1);
  assert.ok(keys.includes('192.0.2.5:5432'));
  assert.ok(list.endpoints.every((e) => !e.ip.startsWith('127.') && !e.ip.includes(':')), `no loopback, no IPv6: ${keys.join(' ')}`);
  const own = Object.values(networkInterfaces()).flatMap((l) => l ?? []).filter((i) => i.family === 'IPv4' && !i.internal).map((i) => `${i.address}:${WILDCARD_PORT}`);
  for (const k of own) assert.ok(keys.includes(k), `the wildcard listener at this host's ${k}`);
});

test('master.platform_networks: every address of the platform\'s hosts is refused, on any port, and the egress proxy and node agents get them', async () => {
  const t = targets({ networks: ['198.51.100.0/28'] });
  await refused(t, 'http://198.51.100.6:8089/v1/sandboxes/x/pause', /198\.51\.100\.6 is in master\.platform_networks \(the platform's own hosts\)/);
  await refused(t, 'https://198.51.100.15/', /platform_networks/);
  await allowed(t, 'http://198.51.100.16/');
  assert.deepEqual((await t.platformAddresses()).networks, ['198.51.100.0/28']);
});

test('cloud metadata: link-local (IPv4 and IPv6) and AWS\'s fd00:ec2::254 are refused for a webhook too; loopback and private stay allowed', async () => {
  // Until 2026-12-01 only a sandbox's SOCKS5 endpoint was refused these: a team's webhook could
  // POST to 169.254.169.254 from the master's host, or its IPv6 twin.
  const t = targets();
  await refused(t, 'http://169.254.169.254/latest/meta-data/', /169\.254\.169\.254 is link-local \(cloud metadata services\)/);
  await refused(t, 'http://169.254.1.1:8080/', /is link-local/);
  await refused(t, 'http://[fe80::a9fe:a9fe]/', /fe80::a9fe:a9fe is link-local/);
  await refused(t, 'http://[febf::1]/', /is link-local/);
  await refused(t, 'http://[fd00:ec2::254]/latest/meta-data/', /fd00:ec2::254 is AWS's IPv6 metadata service/);
  await refused(t, 'http://[::ffff:169.254.169.254]/', /169\.254\.169\.254 \(::ffff:a9fe:a9fe\) is link-local/);
  assert.deepEqual(await allowed(t, 'http://127.0.0.1:9000/hook'), ['127.0.0.1'], 'loopback stays the operator\'s to use');
  assert.deepEqual(await allowed(t, 'http://[fd00:ec2::253]/'), ['fd00:ec2::253'], 'a private IPv6 address that is not the metadata service');
  assert.deepEqual(await allowed(t, 'http://[fec0::1]/'), ['fec0::1'], 'past fe80::/10');
});

test('IPv6 forms that carry an IPv4 address (NAT64, 6to4) are judged as that address, by every rule', async () => {
  const t = targets({ networks: ['198.51.100.0/28'] });
  await refused(t, 'http://[64:ff9b::a9fe:a9fe]/', /64:ff9b::a9fe:a9fe carries 169\.254\.169\.254, which is link-local/);
  await refused(t, 'http://[2002:a9fe:a9fe::1]/', /2002:a9fe:a9fe::1 carries 169\.254\.169\.254, which is link-local/);
  await refused(t, 'http://[64:ff9b::ac8:1]/', /carries 10\.200\.0\.1, which is in the sandbox address pool/);
  await refused(t, 'http://[64:ff9b::c633:6406]/', /carries 198\.51\.100\.6, which is in master\.platform_networks/);
  await refused(t, `http://[64:ff9b::7f00:1]:${MASTER_PORT}/`, /carries 127\.0\.0\.1, which port 7100 is one of the platform's own components/);
  assert.deepEqual(await allowed(t, 'http://[64:ff9b::5db8:d822]/'), ['64:ff9b::5db8:d822'], 'a public address through NAT64');
  const allowList = targets({ allowCidrs: ['192.168.0.0/16'] });
  assert.deepEqual(await allowed(allowList, 'http://[64:ff9b::c0a8:101]/'), ['64:ff9b::c0a8:101'], 'inside events.webhook_allow_cidrs as the address it reaches');
  await assert.rejects(t.checkEndpoint('64:ff9b::7f00:1', 1080, 'network.egressProxy'), /carries 127\.0\.0\.1, which is a loopback address/);
  await assert.rejects(t.checkEndpoint('fe80::1', 1080, 'network.egressProxy'), /fe80::1 is link-local/);
});
