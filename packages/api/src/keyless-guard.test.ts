/**
 * An API without keys (keyless-guard.ts) on the real gateway over a real master (fake node): a
 * web page's cross-site POST and a DNS-rebinding page's requests are refused on every route,
 * as /mcp refused them; the operator's own tools (no Origin, a loopback Host) are served.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { startApiGateway } from './index.ts';

/** fetch sets Host from the URL: a raw request names what a rebinding page's browser sends. */
function send(url: string, method: string, path: string, headers: Record<string, string>, body = ''): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('without keys, requests from another host\'s page or under another host name are refused on every route', async () => {
  const m = await startMasterOverFakeNode((c) => { c.api.api_key = ''; c.api.listen = '127.0.0.1:0'; });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  try {
    const port = new URL(gw.url).port;
    const csrf = await send(gw.url, 'POST', '/admin/teams/00000000-0000-4000-8000-000000000001/sandboxes/kill',
      { host: `127.0.0.1:${port}`, origin: 'http://evil.example', 'content-type': 'text/plain' });
    assert.equal(csrf.status, 403, csrf.body);
    assert.match(JSON.parse(csrf.body).message, /invalid Origin header "http:\/\/evil.example"/);

    const rebound = await send(gw.url, 'GET', '/svc/teams', { host: `attacker.example:${port}`, origin: `http://attacker.example:${port}` });
    assert.equal(rebound.status, 403, rebound.body);
    assert.match(JSON.parse(rebound.body).message, /invalid Host header "attacker.example:\d+"/);
    const created = await send(gw.url, 'POST', '/svc/teams', { host: `attacker.example:${port}`, 'content-type': 'application/json' }, '{"name":"x"}');
    assert.equal(created.status, 403, 'no team made, no key handed out');

    const own = await send(gw.url, 'GET', '/svc/teams', { host: `localhost:${port}` });
    assert.equal(own.status, 200, own.body);
    const sameOrigin = await send(gw.url, 'GET', '/v2/sandboxes', { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}` });
    assert.equal(sameOrigin.status, 200, 'the console on the API\'s own origin is served');
  } finally {
    await gw.close();
    await m.close();
  }
});

test('with keys, another host\'s name is no refusal: the key decides', async () => {
  const ADMIN = 'e2b_00000000000000000000000000000000000000ad';
  const m = await startMasterOverFakeNode((c) => { c.api.api_key = ADMIN; });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  try {
    const r = await send(gw.url, 'GET', '/v2/sandboxes', { host: 'api.example.com', 'x-api-key': ADMIN });
    assert.equal(r.status, 200, r.body);
  } finally {
    await gw.close();
    await m.close();
  }
});
