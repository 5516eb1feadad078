import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig } from '@svc/common';
import { ensureLocalTls } from './local-tls.ts';
import { e2bEnvLines } from './up.ts';

test('svc up --tls: a local CA signs a certificate for every <port>-<id>.<domain>, kept across restarts', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-tls-'));
  try {
    const tls = ensureLocalTls(dir, 'sandboxes.test');
    const cert = new X509Certificate(readFileSync(tls.certFile));
    assert.equal(cert.checkHost('49983-i0123456789abcdefghij.sandboxes.test'), '*.sandboxes.test');
    assert.equal(cert.checkHost('a.b.sandboxes.test'), undefined, 'one label only, as a wildcard allows');
    assert.ok(cert.verify(new X509Certificate(readFileSync(tls.caFile)).publicKey));
    const again = ensureLocalTls(dir, 'sandboxes.test');
    assert.equal(readFileSync(again.certFile, 'utf8'), readFileSync(tls.certFile, 'utf8'), 'kept');
    assert.deepEqual([tls.newCa, again.newCa], [true, false]);
    const caBefore = readFileSync(tls.caFile, 'utf8');
    const moved = ensureLocalTls(dir, 'other.test');
    assert.ok(new X509Certificate(readFileSync(moved.certFile)).checkHost('8000-x.other.test'), 'a new domain gets a new certificate');
    assert.equal(moved.newCa, true, 'and a CA of its own: the first may sign for sandboxes.test only');
    assert.notEqual(readFileSync(moved.caFile, 'utf8'), caBefore);
    assert.equal(ensureLocalTls(dir, 'sub.other.test').newCa, false, 'a domain under the CA\'s is covered by it');
    ensureLocalTls(dir, 'other.test');

    // A client that trusts the CA reaches a server with the certificate by a sandbox's name.
    const server = createServer({ cert: readFileSync(moved.certFile), key: readFileSync(moved.keyFile) }, (_req, res) => res.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as { port: number }).port;
      const body = await new Promise<string>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, servername: '8000-abc.other.test', ca: readFileSync(moved.caFile), headers: { host: '8000-abc.other.test' } }, (res) => {
          let b = '';
          res.on('data', (d) => { b += d; });
          res.on('end', () => resolve(b));
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(body, 'ok');
    } finally {
      server.close();
    }
    // The CA's key signs a certificate for another site: a client that trusts the CA refuses it.
    const forged = forge(dir, moved.caFile, join(dir, 'ca-key.pem'), 'bank.example');
    const refused = await new Promise<Error | undefined>((resolve) => {
      const server = createServer({ cert: readFileSync(forged.cert), key: readFileSync(forged.key) }, (_req, res) => res.end('ok'));
      server.listen(0, '127.0.0.1', () => {
        const port = (server.address() as { port: number }).port;
        const req = request({ host: '127.0.0.1', port, servername: 'www.bank.example', ca: readFileSync(moved.caFile), headers: { host: 'www.bank.example' } }, (res) => {
          res.resume();
          res.on('end', () => { server.close(); resolve(undefined); });
        });
        req.on('error', (err) => { server.close(); resolve(err); });
        req.end();
      });
    });
    assert.ok(refused, 'the forged certificate was refused');
    assert.match(refused.message, /permitted subtree violation/, 'for the name constraint');
    assert.throws(() => ensureLocalTls(dir, 'localhost'), /two labels/);
    assert.throws(() => ensureLocalTls(dir, 'bad domain.test'), /not a DNS name/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A certificate for `*.<site>` signed with the CA's key, as whoever read the key could make. */
function forge(dir: string, caFile: string, caKey: string, site: string): { cert: string; key: string } {
  const key = join(dir, 'forged-key.pem');
  const csr = join(dir, 'forged.csr');
  const cert = join(dir, 'forged.pem');
  const ext = join(dir, 'forged.ext');
  writeFileSync(ext, `basicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:*.${site},DNS:${site}\n`);
  execFileSync('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=*.${site}`, '-keyout', key, '-out', csr], { stdio: 'ignore' });
  execFileSync('openssl', ['x509', '-req', '-in', csr, '-CA', caFile, '-CAkey', caKey, '-CAcreateserial', '-days', '30', '-sha256', '-extfile', ext, '-out', cert], { stdio: 'ignore' });
  return { cert, key };
}

test('a CA made before its name constraint (any name) is kept across a change of domain: users trust it already', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-tls-old-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-sha256', '-days', '3650',
      '-subj', '/CN=svc local CA', '-keyout', join(dir, 'ca-key.pem'), '-out', join(dir, 'ca.pem'),
      '-addext', 'basicConstraints=critical,CA:TRUE,pathlen:0', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], { stdio: 'ignore' });
    const old = readFileSync(join(dir, 'ca.pem'), 'utf8');
    const a = ensureLocalTls(dir, 'one.test');
    const b = ensureLocalTls(dir, 'two.test');
    assert.deepEqual([a.newCa, b.newCa], [false, false]);
    assert.equal(readFileSync(b.caFile, 'utf8'), old);
    assert.ok(new X509Certificate(readFileSync(b.certFile)).checkHost('1-x.two.test'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the E2B_* lines: by name over HTTPS on 443, else one URL with the sandbox header', () => {
  const cfg = defaultConfig('/tmp/x');
  cfg.api.api_key = 'e2b_00';
  const plain = e2bEnvLines({ apiUrl: 'http://127.0.0.1:3000', sandboxUrl: 'http://127.0.0.1:3002' }, cfg);
  assert.deepEqual(plain, ['E2B_API_URL=http://127.0.0.1:3000', 'E2B_VOLUME_API_URL=http://127.0.0.1:3000', 'E2B_SANDBOX_URL=http://127.0.0.1:3002', 'E2B_API_KEY=e2b_00']);
  cfg.sandbox_domain = 'localhost:3002';
  assert.deepEqual(e2bEnvLines({ apiUrl: 'http://127.0.0.1:3000', sandboxUrl: 'http://127.0.0.1:3002' }, cfg), plain, 'the default domain is not printed');
  cfg.sandbox_domain = 'sbx.example.com';
  const named = e2bEnvLines({ apiUrl: 'http://127.0.0.1:3000', sandboxUrl: 'http://127.0.0.1:3002', sandboxHttpsUrl: 'https://127.0.0.1' }, cfg, '/d/tls/ca.pem');
  assert.deepEqual(named, ['E2B_API_URL=http://127.0.0.1:3000', 'E2B_VOLUME_API_URL=http://127.0.0.1:3000', 'E2B_DOMAIN=sbx.example.com', 'NODE_EXTRA_CA_CERTS=/d/tls/ca.pem', 'E2B_API_KEY=e2b_00']);
  const otherPort = e2bEnvLines({ apiUrl: 'http://a', sandboxUrl: 'http://127.0.0.1:3002', sandboxHttpsUrl: 'https://127.0.0.1:8443' }, cfg, '/ca.pem');
  assert.ok(otherPort.includes('E2B_SANDBOX_URL=http://127.0.0.1:3002'), 'the SDK builds https://<port>-<id>.<domain> without a port: 443 only');
});
