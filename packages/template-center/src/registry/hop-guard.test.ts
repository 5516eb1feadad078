/**
 * Where a registry may send the template center (hop-guard.ts): not into the host it runs on,
 * and no registry there unless the operator names it. Names resolve through a stub, so the test decides what a
 * name stands for (a registry's redirect to a name resolving to loopback included); then the
 * client's plumbing: redirects of manifests and blobs, and a token realm, each checked before
 * it is followed, with a registry that answers on loopback and a guard given by the test; and
 * each connection's own lookup, checked again where it connects (a name rebinding to loopback).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { networkInterfaces } from 'node:os';
import { after, before, test } from 'node:test';
import { hopRefusal, listedRegistry, registryRefusal } from './hop-guard.ts';
import { parseReference } from './reference.ts';
import { RegistryClient } from './registry-client.ts';

const NAMES: Record<string, string[]> = {
  'registry.example': ['93.184.216.34'],
  'cdn.example': ['151.101.1.1'],
  'evil.example': ['::ffff:127.0.0.1'],
  'meta.example': ['151.101.1.2', '169.254.169.254'],
  'registry.local': ['127.0.0.1'],
  '8000-sbx.localhost': ['127.0.0.1'],
};
const resolve = async (host: string) => {
  const found = NAMES[host];
  if (!found) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
  return found;
};

test('a registry elsewhere may not send the pull into this host: loopback, this host, link-local, by address or by name', async () => {
  const refusal = (next: string, registry = 'registry.example') => hopRefusal(registry, new URL(next), resolve);
  assert.equal(await refusal('https://cdn.example/blob'), undefined);
  assert.equal(await refusal('https://151.101.1.1/blob'), undefined);
  assert.equal(await refusal('https://unknown.example/blob'), undefined, 'a name that does not resolve reaches nothing');
  assert.equal(await refusal('http://127.0.0.1:18089/v1/sandboxes'), 'registry.example sent the pull to http://127.0.0.1:18089, and 127.0.0.1 is loopback: the template center follows a registry into the host it runs on only for a registry the operator names in template_center.host_registries');
  assert.match(await refusal('http://localhost:8088/') ?? '', /localhost \(127\.0\.0\.1\) is loopback/);
  assert.match(await refusal('http://evil.example/') ?? '', /evil\.example \(127\.0\.0\.1\) is loopback/);
  assert.match(await refusal('http://[::1]:8089/') ?? '', /::1 is loopback/);
  assert.match(await refusal('http://0.0.0.0:8089/') ?? '', /0\.0\.0\.0 means this host/);
  assert.match(await refusal('http://169.254.169.254/latest/meta-data/') ?? '', /is link-local/);
  assert.match(await refusal('http://meta.example/') ?? '', /meta\.example \(169\.254\.169\.254\) is link-local/, 'any of its addresses');
  const own = Object.values(networkInterfaces()).flatMap((l) => l ?? []).find((i) => i.family === 'IPv4' && !i.internal)?.address;
  if (own) assert.match(await refusal(`http://${own}:8089/`) ?? '', /is an address of this host/);
  // IPv6 spellings of the same places, which URL rewrites (::ffff:127.0.0.1 becomes ::ffff:7f00:1).
  assert.match(await refusal('http://[::ffff:127.0.0.1]:8089/') ?? '', /::ffff:7f00:1 \(127\.0\.0\.1\) is loopback/);
  assert.match(await refusal('http://[::ffff:a9fe:a9fe]/latest/meta-data/') ?? '', /\(169\.254\.169\.254\) is link-local/);
  assert.match(await refusal('http://[0:0:0:0:0:0:0:1]:8089/') ?? '', /::1 is loopback/);
});

test('an IPv6 registry written any way is recognised where it lands', async () => {
  for (const registry of ['[::ffff:7f00:1]:5000', '[0:0:0:0:0:ffff:127.0.0.1]:5000', '[0:0:0:0:0:0:0:1]:5000', '[::FFFF:7F00:0001]:5000', '[0::]:5000']) {
    assert.ok(await registryRefusal(registry, resolve), registry);
  }
});

test('a registry on this host is refused unless the operator names it (loopback, 0.0.0.0, link-local, a name resolving there); one elsewhere is not', async () => {
  assert.equal(await registryRefusal('registry.example', resolve), undefined);
  assert.equal(await registryRefusal('registry.example:5000', resolve), undefined);
  assert.equal(await registryRefusal('unknown.example', resolve), undefined, 'a name that does not resolve reaches nothing');
  assert.match(await registryRefusal('127.0.0.1:18089', resolve) ?? '', /^registry 127\.0\.0\.1:18089 is on the host the template center runs on \(127\.0\.0\.1 is loopback\); builds pull from a registry there only when the operator names it in template_center\.host_registries \(SVC_HOST_REGISTRIES\), for example "127\.0\.0\.1:18089"$/);
  assert.match(await registryRefusal('localhost:5000', resolve) ?? '', /localhost \(127\.0\.0\.1\) is loopback/);
  assert.match(await registryRefusal('[::1]:5000', resolve) ?? '', /::1 is loopback/);
  assert.match(await registryRefusal('0.0.0.0:8088', resolve) ?? '', /0\.0\.0\.0 means this host/);
  assert.match(await registryRefusal('169.254.169.254', resolve) ?? '', /is link-local/);
  // A sandbox's server behind the data-plane proxy answers at <port>-<id>.<sandbox_domain>, which resolves to this host.
  assert.match(await registryRefusal('8000-sbx.localhost:3002', resolve) ?? '', /8000-sbx\.localhost \(127\.0\.0\.1\) is loopback/);
  assert.match(await registryRefusal('evil.example', resolve) ?? '', /evil\.example \(127\.0\.0\.1\) is loopback/);
  const own = Object.values(networkInterfaces()).flatMap((l) => l ?? []).find((i) => i.family === 'IPv4' && !i.internal)?.address;
  if (own) assert.match(await registryRefusal(`${own}:5000`, resolve) ?? '', /is an address of this host/);

  assert.equal(listedRegistry('localhost:5000', ['localhost:5000']), true);
  assert.equal(listedRegistry('LocalHost:5000', ['localhost:5000']), true, 'names compare without case');
  assert.equal(listedRegistry('localhost:5001', ['localhost:5000']), false, 'the port is part of the name');
  assert.equal(listedRegistry('127.0.0.1:5000', ['localhost:5000']), false, 'as images name them: another spelling is another name');
  assert.equal(listedRegistry('anything:1', ['*']), true);
  assert.equal(listedRegistry('localhost:5000', []), false);
});

/**
 * A registry the operator did not name may not be, or send the pull, on a private or reserved
 * network either (address-refusal.ts): another host of the platform, a cloud's metadata service
 * (Alibaba's at 100.100.100.200, AWS's IPv6 one at fd00:ec2::254), a database on the LAN. Before
 * 2026-12-01 only the host's own addresses were refused. The IPv6 forms that carry an IPv4
 * address are judged by it.
 */
test('a registry on a private or reserved network, or a hop there, is refused unless listed; by address, by name, and in IPv6 forms carrying the address', async () => {
  const names: Record<string, string[]> = { 'lan.example': ['10.1.2.3'], 'mixed.example': ['151.101.1.1', '192.168.7.7'] };
  const res = async (h: string) => { if (names[h]) return names[h]; throw new Error(`ENOTFOUND ${h}`); };
  const cases: Array<[string, RegExp]> = [
    ['10.0.0.5:8080', /10\.0\.0\.5 is private \(RFC 1918\)/],
    ['172.16.0.1', /172\.16\.0\.1 is private \(RFC 1918\)/],
    ['172.31.255.255', /is private \(RFC 1918\)/],
    ['192.168.1.10:5432', /192\.168\.1\.10 is private \(RFC 1918\)/],
    ['100.100.100.200', /100\.100\.100\.200 is shared address space \(RFC 6598\)/],
    ['198.18.0.1', /is a benchmarking network \(RFC 2544\)/],
    ['224.0.0.1', /is multicast/],
    ['[fd00:ec2::254]', /fd00:ec2::254 is a unique local address \(private, RFC 4193\)/],
    ['[ff02::1]', /is multicast/],
    ['[::ffff:10.0.0.5]:5000', /\(10\.0\.0\.5\) is private/],
    ['[64:ff9b::a00:5]', /64:ff9b::a00:5 carries 10\.0\.0\.5, which is private \(RFC 1918\)/],
    ['[64:ff9b::7f00:1]', /carries 127\.0\.0\.1, which is loopback/],
    ['[2002:a9fe:a9fe::1]', /carries 169\.254\.169\.254, which is link-local/],
    ['[::a00:5]', /carries 10\.0\.0\.5/],
    ['lan.example:5000', /lan\.example \(10\.1\.2\.3\) is private/],
    ['mixed.example', /mixed\.example \(192\.168\.7\.7\) is private/],
  ];
  for (const [registry, why] of cases) {
    const refusal = await registryRefusal(registry, res);
    assert.match(refusal ?? '', why, registry);
    const onHost = /loopback|link-local/.test(why.source);
    assert.match(refusal ?? '', new RegExp(`^registry ${registry.replace(/[.[\]]/g, '\\$&')} is ${onHost ? 'on the host the template center runs on' : 'on a private or reserved network'} \\(.*\\); builds pull from a registry there only when the operator names it in template_center\\.host_registries`), registry);
    const hop = await hopRefusal('registry.example', new URL(`http://${registry}/v2/`), res);
    assert.match(hop ?? '', why, `hop to ${registry}`);
  }
  assert.match(await hopRefusal('registry.example', new URL('http://10.0.0.5/'), res) ?? '', /the template center follows a registry into a private or reserved network only for a registry the operator names in template_center\.host_registries$/);
  for (const publicOne of ['93.184.216.34', '172.32.0.1', '100.128.0.1', '[2001:db8::1]', '[2606:4700::1111]', '[64:ff9b::5db8:d822]']) {
    assert.equal(await registryRefusal(publicOne, res), undefined, publicOne);
  }
});

// ---- the client checks every hop before it takes it ----

const DIGEST = `sha256:${'a'.repeat(64)}`;
let server: Server;
let host: string;
let port: number;
const asked: string[] = [];

before(async () => {
  server = createServer((req, res) => {
    asked.push(req.url ?? '');
    if (req.url === '/v2/r/manifests/v1') { res.writeHead(302, { location: '/forbidden/manifest' }).end(); return; }
    if (req.url === '/v2/r/manifests/v2') { res.writeHead(307, { location: '/allowed/manifest' }).end(); return; }
    if (req.url === '/v2/r/manifests/rebind') { res.writeHead(302, { location: `http://localhost:${port}/allowed/manifest?rebound` }).end(); return; }
    if (req.url?.startsWith('/allowed/manifest')) { res.writeHead(200, { 'content-type': 'application/json' }).end('{"schemaVersion":2}'); return; }
    if (req.url === `/v2/r/blobs/${DIGEST}`) { res.writeHead(302, { location: `http://${host}/forbidden/blob` }).end(); return; }
    if (req.url === '/v2/auth/manifests/v1') { res.writeHead(401, { 'www-authenticate': `Bearer realm="http://${host}/forbidden/token",service="x"` }).end(); return; }
    res.writeHead(404).end('{"errors":[{"code":"NOT_FOUND","message":"asked for something else"}]}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
  host = `127.0.0.1:${port}`;
});
after(() => { server.closeAllConnections(); server.close(); });

const guarded = (repo: string) => new RegistryClient(parseReference(`${host}/${repo}:v1`), {
  insecure: true,
  hopRefusal: async (next) => (next.pathname.startsWith('/forbidden') ? `not to ${next.pathname} (the test's guard)` : undefined),
});

test('a manifest\'s redirect, a blob\'s redirect and a token realm are refused before they are followed; an allowed redirect is followed', async () => {
  await assert.rejects(guarded('r').manifest('v1'), (e: Error) => { assert.equal(e.message, 'not to /forbidden/manifest (the test\'s guard)'); return true; });
  await assert.rejects(guarded('r').blobStream(DIGEST), (e: Error) => { assert.equal(e.message, 'not to /forbidden/blob (the test\'s guard)'); return true; });
  await assert.rejects(guarded('auth').manifest('v1'), (e: Error) => { assert.equal(e.message, 'not to /forbidden/token (the test\'s guard)'); return true; });
  assert.deepEqual(asked.filter((u) => u.startsWith('/forbidden')), [], 'nothing refused was asked for');
  const followed = await guarded('r').manifest('v2');
  assert.deepEqual(followed.doc, { schemaVersion: 2 });
  assert.ok(asked.includes('/allowed/manifest'));
});

test('by default a redirect into this host is refused; a registry the operator named (trusted) is followed there', async () => {
  const ref = parseReference(`${host}/r:v1`);
  await assert.rejects(new RegistryClient(ref, { insecure: true }).manifest('v1'), (e: Error) => {
    assert.match(e.message, new RegExp(`^${host.replace(/\./g, '\\.')} sent the pull to http://${host.replace(/\./g, '\\.')}, and 127\\.0\\.0\\.1 is loopback`));
    return true;
  });
  assert.deepEqual(asked.filter((u) => u.startsWith('/forbidden')), [], 'not followed');
  await assert.rejects(new RegistryClient(ref, { insecure: true, trusted: true }).manifest('v1'), /asked for something else|manifest/);
  assert.ok(asked.includes('/forbidden/manifest'), 'the trusted registry\'s redirect was followed');
});

test('a name the check let through but that resolves into this host when connecting is refused at the connection (DNS rebinding)', async () => {
  // The test's guard lets every /allowed hop through, as the check would for a name that answered
  // a public address then: the connection resolves `localhost` itself, and finds loopback.
  await assert.rejects(guarded('r').manifest('rebind'), (e: Error & { status?: number }) => {
    assert.match(e.message, /^localhost resolved to (127\.0\.0\.1|::1), which is loopback: the template center connects into the host it runs on only for a registry the operator names in template_center\.host_registries$/);
    assert.equal(e.status, 403);
    return true;
  });
  assert.ok(!asked.includes('/allowed/manifest?rebound'), 'no connection was made');
  // The registry's own name is held to it too, on every connection (the pre-check is the caller's).
  const byName = parseReference(`localhost:${port}/r:v2`);
  await assert.rejects(new RegistryClient(byName, { insecure: true, hopRefusal: async () => undefined }).manifest('v2'), /: localhost resolved to .* which is loopback/);
  await assert.rejects(new RegistryClient(byName, { insecure: true, hopRefusal: async () => undefined }).blobStream(DIGEST), /: localhost resolved to .* which is loopback/);
  // A registry the operator named connects there.
  const trusted = await new RegistryClient(byName, { insecure: true, trusted: true }).manifest('v2');
  assert.deepEqual(trusted.doc, { schemaVersion: 2 });
  await new RegistryClient(parseReference(`${host}/r:v1`), { insecure: true, trusted: true }).manifest('rebind');
  assert.ok(asked.includes('/allowed/manifest?rebound'), 'the trusted registry\'s redirect to localhost was followed');
});
