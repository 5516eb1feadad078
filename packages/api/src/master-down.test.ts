/**
 * The master not answering, as the public sees it: a 503 with Retry-After whose message names no
 * address of the platform's (before 2026-11-30 it carried `connect ECONNREFUSED 10.0.0.5:8089`,
 * to callers without a valid key too). The details go to the gateway's log.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultConfig, freePort, silentLogger } from '@svc/common';
import { startApiGateway } from './index.ts';

test('a master that does not answer: 503 naming no address, for a key check, a forwarded route and a client call alike', async () => {
  const port = await freePort();
  const cfg = defaultConfig('/tmp/svc-api-master-down');
  cfg.api.listen = '127.0.0.1:0';
  cfg.api.api_key = 'e2b_0123456789abcdef0123456789abcdef01234567';
  const gw = await startApiGateway(cfg, { logger: silentLogger(), masterUrl: `http://127.0.0.1:${port}` });
  try {
    const cases: Array<[string, string, Record<string, string>]> = [
      ['GET', '/sandboxes', { 'x-api-key': 'e2b_ffffffffffffffffffffffffffffffffffffffff' }], // a key the master must check
      ['GET', '/sandboxes', { 'x-api-key': cfg.api.api_key }], // the admin key: the master client's call
      ['GET', '/templates', { 'x-api-key': cfg.api.api_key }], // forwarded as it came
    ];
    for (const [method, path, headers] of cases) {
      const r = await fetch(gw.url + path, { method, headers });
      const text = await r.text();
      assert.equal(r.status, 503, `${path}: ${text}`);
      assert.equal(r.headers.get('retry-after'), '2');
      assert.doesNotMatch(text, new RegExp(`127\\.0\\.0\\.1|${port}|ECONNREFUSED`), text);
      assert.match(JSON.parse(text).message, /did not answer; retry shortly/);
    }
  } finally {
    await gw.close();
  }
});
