/**
 * The public REST API's sandbox routes as one test suite, every answer checked against the
 * OpenAPI document (public-api.ts) for its path, method and status. The real gateway runs it
 * (packages/api/src/public-api.contract.test.ts, over a real master) and so does our SDK's fake
 * (packages/sdk/src/testing/fake-api.contract.test.ts), so an SDK or CLI test that passes against
 * the fake says something about the wire.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileValidator } from '@svc/common';
import type { PublicPath } from './public-api.ts';
import { routeSchema } from './route-schemas.ts';

export interface PublicApiSubject {
  url: string;
  apiKey: string;
  /** A template (id or alias) a sandbox can be created from. */
  template: string;
  close(): Promise<void>;
}

interface Answer { status: number; body: unknown }

/** Fails unless the answer is one the document gives for this operation, in its shape. */
function assertDocumented(path: PublicPath, method: string, answer: Answer): void {
  const responses = routeSchema(path, method).response ?? {};
  const schema = responses[String(answer.status)];
  if (!schema) {
    assert.equal(answer.body, undefined, `${method} ${path} ${answer.status} has no body in the document`);
    return;
  }
  const validate = compileValidator({ schema, httpPart: 'body' });
  assert.ok(validate(answer.body), `${method} ${path} ${answer.status}: ${JSON.stringify(validate.errors?.[0])} in ${JSON.stringify(answer.body)}`);
}

export function publicApiContract(name: string, make: () => Promise<PublicApiSubject>): void {
  test(`public API contract: ${name}`, async (t) => {
    const s = await make();
    const call = async (method: string, path: PublicPath, params: Record<string, string> = {}, body?: unknown, key = s.apiKey): Promise<Answer> => {
      const url = path.replace(/\{(\w+)\}/g, (_, p: string) => encodeURIComponent(params[p]!));
      const res = await fetch(s.url + url, {
        method,
        headers: { ...(key ? { 'x-api-key': key } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      const answer = { status: res.status, body: text ? JSON.parse(text) as unknown : undefined };
      assertDocumented(path, method, answer);
      return answer;
    };
    try {
      let id = '';
      await t.test('create answers 201 with the sandbox; get and both lists show it', async () => {
        const created = await call('POST', '/sandboxes', {}, { templateID: s.template, timeout: 300, metadata: { suite: 'contract' } });
        assert.equal(created.status, 201);
        id = (created.body as { sandboxID: string }).sandboxID;
        const got = await call('GET', '/sandboxes/{sandboxID}', { sandboxID: id });
        assert.equal(got.status, 200);
        assert.equal((got.body as { state: string }).state, 'running');
        assert.deepEqual((got.body as { metadata: object }).metadata, { suite: 'contract' });
        const v2 = await call('GET', '/v2/sandboxes');
        assert.ok((v2.body as Array<{ sandboxID: string }>).some((x) => x.sandboxID === id));
        const v1 = await call('GET', '/sandboxes');
        assert.ok((v1.body as Array<{ sandboxID: string }>).some((x) => x.sandboxID === id));
      });

      await t.test('timeout answers 204; metrics answer a list', async () => {
        assert.equal((await call('POST', '/sandboxes/{sandboxID}/timeout', { sandboxID: id }, { timeout: 120 })).status, 204);
        assert.equal((await call('GET', '/sandboxes/{sandboxID}/metrics', { sandboxID: id })).status, 200);
      });

      await t.test("logs answer E2B's shapes, v1 and v2, with the sandbox's start in them; a bad query is a 400", async () => {
        const v2 = await call('GET', '/v2/sandboxes/{sandboxID}/logs', { sandboxID: id });
        assert.equal(v2.status, 200);
        assert.ok((v2.body as { logs: unknown[] }).logs.length > 0);
        const v1 = await call('GET', '/sandboxes/{sandboxID}/logs', { sandboxID: id });
        assert.equal(v1.status, 200);
        const { logs, logEntries } = v1.body as { logs: Array<{ line: string }>; logEntries: unknown[] };
        assert.equal(logs.length, logEntries.length);
        for (const l of logs) assert.equal(typeof (JSON.parse(l.line) as { level?: unknown }).level, 'string', "E2B's CLI reads each line's level");
        const bad = await fetch(`${s.url}/v2/sandboxes/${encodeURIComponent(id)}/logs?direction=sideways`, { headers: { 'x-api-key': s.apiKey } });
        assert.equal(bad.status, 400);
      });

      await t.test('pause answers 204 and a second pause 409; connect resumes (201), then finds it running (200)', async () => {
        assert.equal((await call('POST', '/sandboxes/{sandboxID}/pause', { sandboxID: id })).status, 204);
        assert.equal(((await call('GET', '/sandboxes/{sandboxID}', { sandboxID: id })).body as { state: string }).state, 'paused');
        assert.equal((await call('POST', '/sandboxes/{sandboxID}/pause', { sandboxID: id })).status, 409);
        assert.equal((await call('POST', '/sandboxes/{sandboxID}/connect', { sandboxID: id }, { timeout: 60 })).status, 201);
        assert.equal((await call('POST', '/sandboxes/{sandboxID}/connect', { sandboxID: id }, { timeout: 60 })).status, 200);
      });

      await t.test('kill answers 204; then the sandbox is 404', async () => {
        assert.equal((await call('DELETE', '/sandboxes/{sandboxID}', { sandboxID: id })).status, 204);
        assert.equal((await call('GET', '/sandboxes/{sandboxID}', { sandboxID: id })).status, 404);
        assert.equal((await call('DELETE', '/sandboxes/{sandboxID}', { sandboxID: id })).status, 404);
        assert.equal((await call('POST', '/sandboxes/{sandboxID}/pause', { sandboxID: id })).status, 404);
      });

      await t.test('bad input: an unknown template 404, a missing templateID 400 naming it, a wrong type 400; no key 401', async () => {
        assert.equal((await call('POST', '/sandboxes', {}, { templateID: 'no-such-template' })).status, 404);
        const missing = await call('POST', '/sandboxes', {}, { timeout: 30 });
        assert.equal(missing.status, 400);
        assert.match((missing.body as { message: string }).message, /templateID/);
        assert.equal((await call('POST', '/sandboxes', {}, { templateID: s.template, timeout: '30' })).status, 400);
        if (s.apiKey) assert.equal((await call('GET', '/v2/sandboxes', {}, undefined, '')).status, 401);
      });
    } finally {
      await s.close();
    }
  });
}
