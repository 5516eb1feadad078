import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPlatform, Upstream } from './testing/harness.ts';
import { freePort } from '@svc/common';

function selfSigned(): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'svc-proxy-tls-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=sandbox.test', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    return { cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), key: readFileSync(join(dir, 'key.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}


test('HTTPS listener (proxy.https_port with a certificate): routes like HTTP and says X-Forwarded-Proto: https', async () => {
  const tls = selfSigned();
  const p = await startPlatform({ https: { port: await freePort(), ...tls } });
  const up = new Upstream('tls-sbx');
  await up.listen();
  try {
    p.master.add({ sandboxId: 'sec', envdPort: up.port });
    assert.ok(p.proxy.httpsUrl);
    const u = new URL(p.proxy.httpsUrl!);
    const reply = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({ host: u.hostname, port: u.port, path: '/echo', ca: tls.cert, servername: 'sandbox.test', headers: { host: `${up.port}-sec.sandbox.test` } }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(reply.status, 200);
    assert.equal(JSON.parse(reply.body).upstream, 'tls-sbx');
    assert.equal(up.requests.at(-1)!.headers['x-forwarded-proto'], 'https');
  } finally {
    await p.close();
    await up.close();
  }
});
