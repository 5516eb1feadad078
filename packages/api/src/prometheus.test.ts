import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@svc/common';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { startApiGateway } from './index.ts';

const ADMIN = 'e2b_00000000000000000000000000000000000000ad';

test('GET /metrics on the API port: the admin key only (no key 401, a team\'s key 403), the process\'s metrics in the text format', async () => {
  const m = await startMasterOverFakeNode((c) => { c.api.api_key = ADMIN; });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  const get = (headers: Record<string, string>) => fetch(`${gw.url}/metrics`, { headers });
  try {
    const made = await fetch(`${gw.url}/svc/teams`, { method: 'POST', headers: { 'x-api-key': ADMIN, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'metrics-team' }) });
    assert.equal(made.status, 201);
    const teamKey = (await made.json() as { apiKey: string }).apiKey;
    const created = await fetch(`${gw.url}/sandboxes`, { method: 'POST', headers: { 'x-api-key': ADMIN, 'content-type': 'application/json' }, body: JSON.stringify({ templateID: 'base' }) });
    assert.equal(created.status, 201);

    const none = await get({});
    assert.equal(none.status, 401);
    assert.equal((await none.json() as { code: number }).code, 401);
    const team = await get({ 'x-api-key': teamKey });
    assert.equal(team.status, 403);
    assert.match((await team.json() as { message: string }).message, /metrics are the operator's: this needs the admin API key/);
    assert.equal((await get({ authorization: `Bearer ${teamKey}` })).status, 403);

    for (const headers of [{ 'x-api-key': ADMIN }, { authorization: `Bearer ${ADMIN}` }] as Array<Record<string, string>>) {
      const r = await get(headers);
      assert.equal(r.status, 200, JSON.stringify(Object.keys(headers)));
      assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
      const body = await r.text();
      // The master runs in this process, as in svc up: the gateway's scrape shows it.
      assert.match(body, /^svc_sandboxes\{state="running",template="tpl-base",runtime="gvisor"\} 1$/m);
      assert.match(body, /^svc_sandbox_creates_total\{outcome="ok"\} [1-9]/m);
      assert.match(body, /^process_resident_memory_bytes \d+/m);
    }
  } finally {
    await gw.close();
    await m.close();
  }
});
