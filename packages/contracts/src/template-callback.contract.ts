/**
 * The contract of the master's template status callback (POST /internal/template/jobs/:jobId/status),
 * as one test suite: the master runs it (packages/master/src/templates/callback.contract.test.ts) and
 * so does the template center's test double of the master
 * (packages/template-center/src/test-support/fake-master.contract.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pathTo } from './route-table.ts';
import { TEMPLATE_CALLBACK_ROUTES } from './template-callback.ts';
import { CALLBACK_TOKEN_HEADER } from './template-center.ts';

export interface TemplateCallbackSubject {
  url: string;
  token: string;
  /** A build job the subject waits to hear about. */
  awaitedJob(): Promise<string>;
  close(): Promise<void>;
}

export function templateCallbackContract(name: string, make: () => Promise<TemplateCallbackSubject>): void {
  test(`template status callback contract: ${name}`, async (t) => {
    const s = await make();
    const post = async (jobId: string, body: unknown, token: string | null = s.token) => {
      const res = await fetch(`${s.url}${pathTo(TEMPLATE_CALLBACK_ROUTES.status, { jobId })}`, {
        method: TEMPLATE_CALLBACK_ROUTES.status.method,
        headers: { 'content-type': 'application/json', ...(token !== null ? { [CALLBACK_TOKEN_HEADER]: token } : {}) },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) as { code: number; message: string } : undefined };
    };
    try {
      const jobId = await s.awaitedJob();
      await t.test('a report with the token is taken: 204', async () => {
        assert.equal((await post(jobId, { status: 'RUNNING', phase: 'PULLING' })).status, 204);
      });
      await t.test('a missing or wrong token is 401 with the JSON error body', async () => {
        const missing = await post(jobId, { status: 'RUNNING', phase: 'BUILDING' }, null);
        assert.equal(missing.status, 401);
        assert.equal(missing.body?.code, 401);
        assert.equal((await post(jobId, { status: 'RUNNING', phase: 'BUILDING' }, `${s.token}-not`)).status, 401);
      });
      await t.test('a malformed report is 400: an unknown status or phase, a BUILT without its artifact', async () => {
        assert.equal((await post(jobId, { status: 'DONE' })).status, 400);
        assert.equal((await post(jobId, { status: 'RUNNING', phase: 'COOKING' })).status, 400);
        assert.equal((await post(jobId, { status: 'BUILT' })).status, 400);
      });
      await t.test('a report on a job the master does not know is 404', async () => {
        assert.equal((await post('job-never-created', { status: 'RUNNING', phase: 'PULLING' })).status, 404);
      });
    } finally {
      await s.close();
    }
  });
}
