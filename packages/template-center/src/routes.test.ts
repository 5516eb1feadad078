import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CALLBACK_TOKEN_HEADER, TEMPLATE_CENTER_ROUTES } from '@svc/contracts/template-center';
import { routeGaps } from '@svc/contracts/route-table';
import { startHarness, TOKEN } from './test-support/harness.ts';

test('the template center serves exactly the routes of TEMPLATE_CENTER_ROUTES', async () => {
  const h = await startHarness({});
  try {
    assert.deepEqual(routeGaps(TEMPLATE_CENTER_ROUTES, h.tc.routes()), { unlisted: [], unserved: [] });
  } finally {
    await h.close();
  }
});

test('GET /metrics needs the template callback token, in its header or as a bearer: none or another is 401', async () => {
  const h = await startHarness({});
  try {
    const get = (headers: Record<string, string>) => fetch(`${h.tc.url}${TEMPLATE_CENTER_ROUTES.metrics.path}`, { headers });
    assert.equal((await get({})).status, 401);
    assert.equal((await get({ [CALLBACK_TOKEN_HEADER]: 'wrong' })).status, 401);
    assert.equal((await get({ authorization: 'Bearer wrong' })).status, 401);
    assert.equal((await get({ authorization: `Bearer ${TOKEN}` })).status, 200, 'the token as a bearer: all an older Prometheus can send');
    const ok = await get({ [CALLBACK_TOKEN_HEADER]: TOKEN });
    assert.equal(ok.status, 200);
    assert.match(ok.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    assert.match(await ok.text(), /^process_cpu_user_seconds_total \S+$/m);
  } finally {
    await h.close();
  }
});
