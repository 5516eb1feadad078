import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
    const moved = ensureLocalTls(dir, 'other.test');
    assert.ok(new X509Certificate(readFileSync(moved.certFile)).checkHost('8000-x.other.test'), 'a new domain gets a new certificate');
    assert.equal(readFileSync(moved.caFile, 'utf8'), readFileSync(tls.caFile, 'utf8'), 'from the same CA');

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
    assert.throws(() => ensureLocalTls(dir, 'localhost'), /two labels/);
    assert.throws(() => ensureLocalTls(dir, 'bad domain.test'), /not a DNS name/);
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
