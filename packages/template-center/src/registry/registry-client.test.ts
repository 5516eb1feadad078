import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import { parseReference } from './reference.ts';
import { isLoopbackRegistry } from './reference.ts';
import { RegistryClient } from './registry-client.ts';

const DIGEST = `sha256:${'a'.repeat(64)}`;
const FLAKY = `sha256:${'b'.repeat(64)}`;
const ELSEWHERE = `sha256:${'e'.repeat(64)}`;
let port = 0;
const CREDS = { username: 'u', password: 'p' };
const BASIC = `Basic ${Buffer.from('u:p').toString('base64')}`;
let server: Server;
let host: string;
let flakyCalls = 0;

before(async () => {
  // Blobs only, behind Basic auth: enough to follow blobStream's own authentication and retries.
  server = createServer((req, res) => {
    if (req.url === '/internal') { res.writeHead(403).end('{"errors":[{"code":"DENIED","message":"secret-from-inside"}]} secret-from-inside'); return; }
    if (req.headers.authorization !== BASIC) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="test"' }).end('{"errors":[{"code":"UNAUTHORIZED"}]}');
      return;
    }
    if (req.url === `/v2/r/blobs/${DIGEST}`) { res.end('blob bytes'); return; }
    // A registry that sends the pull to another host (here the same server by another name),
    // which answers with what only the template center could reach; and its own error.
    if (req.url === '/v2/r/manifests/elsewhere' || req.url === `/v2/r/blobs/${ELSEWHERE}`) { res.writeHead(302, { location: `http://localhost:${port}/internal` }).end(); return; }
    if (req.url === '/v2/r/manifests/own-error') { res.writeHead(400).end('{"errors":[{"code":"MANIFEST_INVALID","message":"the registry\'s own words"}]}'); return; }
    if (req.url === `/v2/r/blobs/${FLAKY}`) {
      flakyCalls++;
      if (flakyCalls < 3) { res.writeHead(503).end('busy'); return; }
      res.end('finally');
      return;
    }
    res.writeHead(404).end('{"errors":[{"code":"BLOB_UNKNOWN"}]}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
  host = `127.0.0.1:${port}`;
});

after(() => {
  server.closeAllConnections();
  server.close();
});

const message = (m: string) => (e: Error) => { assert.equal(e.message, m); return true; };
const read = async (s: AsyncIterable<Buffer>) => { let t = ''; for await (const c of s) t += c; return t; };
const client = (auth?: typeof CREDS) => new RegistryClient(parseReference(`${host}/r:v1`), { auth, insecure: true });

test('blobStream answers the challenge, retries 5xx and names missing blobs', async () => {
  assert.equal(await read(await client(CREDS).blobStream(DIGEST)), 'blob bytes');
  assert.equal(await read(await client(CREDS).blobStream(FLAKY)), 'finally');
  assert.equal(flakyCalls, 3);
  await assert.rejects(client(CREDS).blobStream(`sha256:${'c'.repeat(64)}`), message(`blob unknown: layer sha256:${'c'.repeat(64)} is missing from ${host}/r`));
});

test('blobStream without or with wrong credentials says so', async () => {
  await assert.rejects(client().blobStream(DIGEST), message(`unauthorized: registry ${host} requires credentials to pull r`));
  await assert.rejects(client({ username: 'u', password: 'nope' }).blobStream(DIGEST), message(`unauthorized: wrong credentials for registry ${host} (user "u" cannot pull r)`));
});

test('blobStream on a closed port fails after its retries with the socket error', async () => {
  const c = new RegistryClient(parseReference('127.0.0.1:1/r:v1'), { insecure: true });
  await assert.rejects(c.blobStream(DIGEST), message('cannot reach registry 127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1'));
});

test('a registry on loopback is plain HTTP without being told, as Docker does; every other host is HTTPS', async () => {
  const plain = new RegistryClient(parseReference(`${host}/r:v1`), { auth: CREDS });
  assert.equal(await read(await plain.blobStream(DIGEST)), 'blob bytes');
  const forcedTls = new RegistryClient(parseReference(`${host}/r:v1`), { auth: CREDS, insecure: false });
  await assert.rejects(forcedTls.blobStream(DIGEST), /plain-HTTP registry/);
  for (const h of ['localhost', 'localhost:5000', '127.0.0.1', '127.1.2.3:443', '[::1]:5000', '[::1]']) assert.equal(isLoopbackRegistry(h), true, h);
  for (const h of ['registry.example.com', 'registry.example.com:5000', '128.0.0.1', '10.0.0.1:5000', 'localhost.example.com', '127.0.0.1.nip.io', 'docker.io']) {
    assert.equal(isLoopbackRegistry(h), false, h);
  }
});

test('a digest or reference from a registry\'s documents that is no digest or tag never reaches a path', async () => {
  const client = new RegistryClient(parseReference('registry.example/team/app:1'));
  await assert.rejects(client.blobStream('sha256:../../../v2/other/blobs/x'), /"sha256:\.\.\/\.\.\/\.\.\/v2\/other\/blobs\/x" is not a digest/);
  await assert.rejects(client.blobBytes(`sha256:${'a'.repeat(63)}`, 10), /is not a digest/);
  await assert.rejects(client.manifest('../../other/manifests/latest'), /is neither a tag nor a digest/);
});

/**
 * A non-2xx answer is quoted only from the registry's own host: a registry (one the operator
 * listed, which may send the pull anywhere) redirecting to a service only the template center
 * reaches had that service's answer read back to the team in the build's error.
 */
test('an error answer from a host the registry sent the pull to is told by its status, not its words; the registry\'s own words are', async () => {
  const trusted = new RegistryClient(parseReference(`${host}/r:v1`), { auth: CREDS, insecure: true, trusted: true });
  for (const attempt of [() => trusted.manifest('elsewhere'), () => trusted.blobStream(ELSEWHERE)]) {
    await assert.rejects(attempt(), (e: Error) => {
      assert.ok(!e.message.includes('secret-from-inside'), e.message);
      assert.match(e.message, new RegExp(`^denied: ${host}/r refused (manifest elsewhere|blob ${ELSEWHERE}): HTTP 403 from http://localhost:${port}$`));
      return true;
    });
  }
  await assert.rejects(trusted.manifest('own-error'), message(`manifest_invalid: ${host}/r answered 400 for manifest own-error: the registry's own words`));
});
