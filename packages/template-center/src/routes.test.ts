import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEMPLATE_CENTER_ROUTES } from '@svc/contracts/template-center';
import { routeGaps } from '@svc/contracts/route-table';
import { startHarness } from './test-support/harness.ts';

test('the template center serves exactly the routes of TEMPLATE_CENTER_ROUTES', async () => {
  const h = await startHarness({});
  try {
    assert.deepEqual(routeGaps(TEMPLATE_CENTER_ROUTES, h.tc.routes()), { unlisted: [], unserved: [] });
  } finally {
    await h.close();
  }
});
