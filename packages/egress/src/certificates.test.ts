import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import tls, { type TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import { EgressCa } from './certificates.ts';

const run = promisify(execFile);
let dir: string;
let ca: EgressCa;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-ca-'));
  ca = await EgressCa.loadOrCreate(join(dir, 'ca'));
});
after(async () => { await rm(dir, { recursive: true, force: true }); });

test('the root CA: files with private modes, self-signed ECDSA P-256 CA with the right extensions, 10 years', async () => {
  assert.equal((await stat(join(dir, 'ca'))).mode & 0o777, 0o700);
  assert.equal((await stat(join(dir, 'ca', 'ca.pem'))).mode & 0o777, 0o600);
  assert.equal((await stat(join(dir, 'ca', 'ca-key.pem'))).mode & 0o777, 0o600);
  const cert = new X509Certificate(ca.caPem);
  assert.equal(cert.subject, 'CN=svc egress root CA');
  assert.equal(cert.issuer, cert.subject);
  assert.equal(cert.ca, true);
  assert.ok(cert.verify(cert.publicKey));
  assert.equal(cert.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
  const years = (Date.parse(cert.validTo) - Date.now()) / (365.25 * 24 * 3600_000);
  assert.ok(years > 9.9 && years < 10.1, `valid for ${years} years`);
  const { stdout } = await run('openssl', ['x509', '-noout', '-text', '-in', join(dir, 'ca', 'ca.pem')]);
  assert.match(stdout, /Basic Constraints: critical\s+CA:TRUE/);
  assert.match(stdout, /Key Usage: critical\s+Certificate Sign, CRL Sign/);
  assert.match(stdout, /Subject Key Identifier/);
  assert.match(stdout, /Signature Algorithm: ecdsa-with-SHA256/);
});

test('loadOrCreate keeps the CA it made; a lone file is an error, not a new CA', async () => {
  const again = await EgressCa.loadOrCreate(join(dir, 'ca'));
  assert.equal(again.caPem, ca.caPem);
  // Leaves of the reloaded CA still chain to the same root.
  const leaf = new X509Certificate(again.leafFor('reload.example.test').cert);
  assert.ok(leaf.verify(new X509Certificate(ca.caPem).publicKey));

  const lone = join(dir, 'lone');
  await EgressCa.loadOrCreate(lone);
  await rm(join(lone, 'ca-key.pem'));
  await assert.rejects(EgressCa.loadOrCreate(lone), /ca-key\.pem is missing/);
});

test('leaves: SAN, CN, validity within the CA, serverAuth, the leaf alone; openssl verify passes', async () => {
  const { cert } = ca.leafFor('API.Example.Test.');
  assert.equal(cert.match(/BEGIN CERTIFICATE/g)?.length, 1);
  const x = new X509Certificate(cert);
  assert.equal(x.subject, 'CN=api.example.test');
  assert.equal(x.subjectAltName, 'DNS:api.example.test');
  assert.equal(x.ca, false);
  assert.equal(x.serialNumber.length, 32);
  assert.ok(Date.parse(x.validFrom) <= Date.now() - 59 * 60_000);
  assert.ok(Date.parse(x.validTo) <= Date.parse(new X509Certificate(ca.caPem).validTo));
  assert.ok(Date.parse(x.validTo) > Date.now() + 360 * 24 * 3600_000);
  assert.deepEqual(x.keyUsage, ['1.3.6.1.5.5.7.3.1']);
  const ipLeaf = new X509Certificate(ca.leafFor('10.1.2.3').cert);
  assert.equal(ipLeaf.subjectAltName, 'IP Address:10.1.2.3');

  await writeFile(join(dir, 'leaf.pem'), cert);
  await writeFile(join(dir, 'leaf-ip.pem'), ca.leafFor('10.1.2.3').cert);
  const long = `${'a'.repeat(60)}.${'b'.repeat(60)}.example.test`;
  await writeFile(join(dir, 'leaf-long.pem'), ca.leafFor(long).cert);
  const { stdout } = await run('openssl', ['verify', '-x509_strict', '-purpose', 'sslserver', '-CAfile', join(dir, 'ca', 'ca.pem'), join(dir, 'leaf.pem'), join(dir, 'leaf-ip.pem'), join(dir, 'leaf-long.pem')]);
  assert.equal(stdout.match(/: OK/g)?.length, 3, stdout);
  const text = (await run('openssl', ['x509', '-noout', '-text', '-in', join(dir, 'leaf.pem')])).stdout;
  assert.match(text, /Key Usage: critical\s+Digital Signature/);
  assert.match(text, /Extended Key Usage:\s+TLS Web Server Authentication/);
  assert.match(text, /Authority Key Identifier/);
  // A name over 64 characters lives in the SAN only (ub-common-name).
  assert.ok(!new X509Certificate(ca.leafFor(long).cert).subject);
});

test('leaves are cached per name and share one key pair', () => {
  const a = ca.leafFor('cache.example.test');
  assert.equal(ca.leafFor('CACHE.example.test').cert, a.cert);
  assert.equal(ca.leafFor('other.example.test').key, a.key);
  assert.notEqual(ca.leafFor('other.example.test').cert, a.cert);
});

test('names that are neither DNS names nor IPv4 addresses are refused', () => {
  for (const bad of ['', 'a b', '*.example.test', 'exa mple', '::1', 'x'.repeat(254)]) {
    assert.throws(() => ca.leafFor(bad), /cannot make a certificate/, bad);
  }
});

async function handshake(name: string | undefined, host = '127.0.0.1'): Promise<TLSSocket> {
  const leaf = ca.leafFor(name ?? host);
  const server = tls.createServer({ cert: leaf.cert, key: leaf.key }, (s) => s.end('hello'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  try {
    return await new Promise<TLSSocket>((resolve, reject) => {
      const socket = tls.connect({ host, port, ca: ca.caPem, ...(name ? { servername: name } : {}) }, () => { socket.end(); resolve(socket); });
      socket.on('error', reject);
    });
  } finally {
    server.close();
  }
}

test('node tls accepts the chain: a DNS name with SNI, and an IP without SNI (default identity check)', async () => {
  const byName = await handshake('api.example.test');
  assert.equal(byName.authorized, true);
  const byIp = await handshake(undefined, '127.0.0.1');
  assert.equal(byIp.authorized, true);
  // A leaf for another name fails node's identity check.
  const leaf = ca.leafFor('other.example.test');
  const server = tls.createServer({ cert: leaf.cert, key: leaf.key }, (s) => s.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await assert.rejects(new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca: ca.caPem, servername: 'api.example.test' }, () => resolve(s));
    s.on('error', reject);
  }), /ERR_TLS_CERT_ALTNAME_INVALID|does not match/);
  server.close();
});

test('minting time (information only)', async () => {
  const fresh = await EgressCa.loadOrCreate(join(dir, 'timing'));
  const n = 500;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fresh.leafFor(`host-${i}.timing.example.test`);
  const mintMs = (performance.now() - t0) / n;
  const t1 = performance.now();
  for (let i = 0; i < n; i++) fresh.leafFor(`host-${i}.timing.example.test`);
  const cachedMs = (performance.now() - t1) / n;
  const t2 = performance.now();
  for (let i = 0; i < 100; i++) { const l = fresh.leafFor(`ctx-${i}.timing.example.test`); tls.createSecureContext({ cert: l.cert, key: l.key }); }
  const withContextMs = (performance.now() - t2) / 100;
  console.log(`# leaf minting: ${mintMs.toFixed(3)} ms per new leaf, ${cachedMs.toFixed(4)} ms cached, ${withContextMs.toFixed(3)} ms with its TLS context`);
  assert.ok(Number.isFinite(mintMs));
});
