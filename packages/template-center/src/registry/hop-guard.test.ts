/**
 * Where a registry may send the template center (hop-guard.ts): not into the host it runs on,
 * unless the registry itself is there. Names resolve through a stub, so the test decides what a
 * name stands for (a registry's redirect to a name resolving to loopback included); then the
 * client's plumbing: redirects of manifests and blobs, and a token realm, each checked before
 * it is followed, with a registry that answers on loopback and a guard given by the test.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { networkInterfaces } from 'node:os';
import { after, before, test } from 'node:test';
import { hopRefusal } from './hop-guard.ts';
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
  assert.equal(await refusal('http://127.0.0.1:18089/v1/sandboxes'), 'registry.example sent the pull to http://127.0.0.1:18089, and 127.0.0.1 is loopback: the template center follows a registry into the host it runs on only for a registry on that host');
  assert.match(await refusal('http://localhost:8088/') ?? '', /localhost \(127\.0\.0\.1\) is loopback/);
  assert.match(await refusal('http://evil.example/') ?? '', /evil\.example \(127\.0\.0\.1\) is loopback/);
  assert.match(await refusal('http://[::1]:8089/') ?? '', /::1 is loopback/);
  assert.match(await refusal('http://0.0.0.0:8089/') ?? '', /0\.0\.0\.0 means this host/);
  assert.match(await refusal('http://169.254.169.254/latest/meta-data/') ?? '', /is link-local/);
  assert.match(await refusal('http://meta.example/') ?? '', /meta\.example \(169\.254\.169\.254\) is link-local/, 'any of its addresses');
  const own = Object.values(networkInterfaces()).flatMap((l) => l ?? []).find((i) => i.family === 'IPv4' && !i.internal)?.address;
  if (own) assert.match(await refusal(`http://${own}:8089/`) ?? '', /is an address of this host/);
});

test('a registry named as loopback may send the pull anywhere (the operator\'s own, a mirror on loopback); a name that merely resolves to this host may not', async () => {
  for (const registry of ['localhost:5000', '127.0.0.1:5000', '[::1]:5000']) {
    assert.equal(await hopRefusal(registry, new URL('http://127.0.0.1:9000/blob'), resolve), undefined, registry);
  }
  // A sandbox's server behind the data-plane proxy answers at <port>-<id>.<sandbox_domain>, which resolves to this host.
  assert.match(await hopRefusal('registry.local:5000', new URL('http://127.0.0.1:18089/v1/sandboxes'), resolve) ?? '', /127\.0\.0\.1 is loopback/);
  assert.match(await hopRefusal('8000-sbx.localhost:3002', new URL('http://127.0.0.1:18089/v1/sandboxes'), resolve) ?? '', /127\.0\.0\.1 is loopback/);
});

// ---- the client checks every hop before it takes it ----

const DIGEST = `sha256:${'a'.repeat(64)}`;
let server: Server;
let host: string;
const asked: string[] = [];

before(async () => {
  server = createServer((req, res) => {
    asked.push(req.url ?? '');
    if (req.url === '/v2/r/manifests/v1') { res.writeHead(302, { location: '/forbidden/manifest' }).end(); return; }
    if (req.url === '/v2/r/manifests/v2') { res.writeHead(307, { location: '/allowed/manifest' }).end(); return; }
    if (req.url === '/allowed/manifest') { res.writeHead(200, { 'content-type': 'application/json' }).end('{"schemaVersion":2}'); return; }
    if (req.url === `/v2/r/blobs/${DIGEST}`) { res.writeHead(302, { location: `http://${host}/forbidden/blob` }).end(); return; }
    if (req.url === '/v2/auth/manifests/v1') { res.writeHead(401, { 'www-authenticate': `Bearer realm="http://${host}/forbidden/token",service="x"` }).end(); return; }
    res.writeHead(404).end('{"errors":[{"code":"NOT_FOUND","message":"asked for something else"}]}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  host = `127.0.0.1:${(server.address() as { port: number }).port}`;
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
