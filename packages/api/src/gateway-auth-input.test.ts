/**
 * The API gateway's front door, as E2B's clients meet it: API keys (current and previous) and the
 * operator auth callback; the open routes; the Sandbox fields a create answers with; and input the
 * contract refuses (malformed, mistyped, out of bounds or oversized) with a 400 naming the field
 * before anything reaches a node. The fixture is testing/gateway-fixture.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { ErrorCodes } from '@svc/common';
import { PublicSchemas } from '@svc/contracts';
import { KEY, PREVIOUS_KEY, platform } from './testing/gateway-fixture.ts';

test('API gateway: E2B wire shapes, auth and bad input', async (t) => {
  const p = await platform();
  try {
    await t.test('auth: missing and wrong keys are 401; X-API-Key and Bearer work; /health is open', async () => {
      assert.equal((await p.call('GET', '/v2/sandboxes', undefined, {})).status, 401);
      assert.equal((await p.call('GET', '/v2/sandboxes', undefined, { 'x-api-key': 'nope' })).status, 401);
      assert.equal((await p.call('GET', '/v2/sandboxes', undefined, { authorization: `Bearer ${KEY}` })).status, 200);
      assert.equal((await p.call('GET', '/v2/sandboxes', undefined, { 'x-api-key': PREVIOUS_KEY })).status, 200, 'a previous key still opens the API');
      assert.equal((await p.call('GET', '/v2/sandboxes', undefined, { 'x-api-key': '' })).status, 401, 'the empty entry of the list is no key');
      const h = await p.call('GET', '/health', undefined, {});
      assert.equal(h.status, 200);
      const doc = await p.call('GET', '/openapi.json', undefined, {});
      assert.equal(doc.status, 200, 'the API description is open');
      assert.equal(doc.body.openapi, '3.1.0');
      assert.ok(doc.body.paths['/v2/sandboxes'].get);
      const page = await fetch(`${p.gw.url}/docs`);
      assert.equal(page.status, 200, 'the browsable page is open');
      assert.match(page.headers.get('content-type') ?? '', /text\/html/);
      const html = await page.text();
      for (const path of Object.keys(doc.body.paths)) assert.ok(html.includes(`<code>${path}</code>`), `the page shows ${path}`);
      assert.ok(!/<script/i.test(html), 'no scripts, nothing fetched from elsewhere');
    });

    await t.test('create: 201 with the Sandbox fields', async () => {
      const r = await p.call('POST', '/v2/sandboxes', { templateID: 'base', timeout: 60, metadata: { a: '1' }, network: { allowPublicTraffic: false } });
      assert.equal(r.status, 201);
      for (const f of ['sandboxID', 'templateID', 'alias', 'clientID', 'envdVersion', 'trafficAccessToken', 'domain']) assert.ok(f in r.body, f);
      assert.match(r.body.trafficAccessToken, /^[0-9a-f-]{36}$/);
      assert.ok(r.body.envdAccessToken, 'a private sandbox is always secure');
      assert.equal(r.body.domain, 'localhost:3002');
      const secure = await p.call('POST', '/sandboxes', { templateID: 'base', secure: true });
      assert.ok(secure.body.envdAccessToken);
    });

    await t.test('bad input: malformed JSON, wrong types, unknown template, oversized body', async () => {
      const bad = await p.call('POST', '/v2/sandboxes', '{nope');
      assert.equal(bad.status, 400);
      assert.deepEqual(Object.keys(bad.body).sort(), ['code', 'message']);
      assert.equal((await p.call('POST', '/v2/sandboxes', { templateID: 'base', timeout: 'soon' })).status, 400);
      assert.equal((await p.call('POST', '/v2/sandboxes', { templateID: 'base', metadata: { a: 1 } })).status, 400);
      assert.equal((await p.call('POST', '/v2/sandboxes', { templateID: 'base', autoResume: { enabled: true } })).status, 400, 'autoResume needs pause');
      assert.equal((await p.call('POST', '/v2/sandboxes', {})).status, 400);
      const unknown = await p.call('POST', '/v2/sandboxes', { templateID: 'nope' });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.code, ErrorCodes.templateNotFound);
      const big = await p.call('POST', '/v2/sandboxes', { templateID: 'base', metadata: { x: 'y'.repeat(10_000) } });
      assert.equal(big.status, 413);
      assert.equal((await p.call('GET', '/nope')).status, 404);
    });

    await t.test('the contract checks input: each refusal is a 400 naming the field; bodies are not coerced, queries are', async () => {
      const refused: Array<[string, string, unknown, RegExp]> = [
        ['POST', '/v2/sandboxes', {}, /^templateID is required$/],
        ['POST', '/v2/sandboxes', { templateID: 'base', timeout: 'soon' }, /^timeout must be integer$/],
        ['POST', '/v2/sandboxes', { templateID: 'base', timeout: '30' }, /^timeout must be integer$/],
        ['POST', '/v2/sandboxes', { templateID: 'base', secure: 'false' }, /^secure must be boolean$/],
        ['POST', '/v2/sandboxes', { templateID: 'base', metadata: { a: 1 } }, /^metadata\.a must be string$/],
        ['POST', '/v2/sandboxes', { templateID: 'base', network: { allowOut: ['ok', 7] } }, /^network\.allowOut\[1\] must be string$/],
        ['POST', '/v2/sandboxes', { templateID: 'base', lifecycle: { on_timeout: 'explode' } }, /^lifecycle\.on_timeout must be one of kill, pause$/],
        ['POST', '/v2/sandboxes', { templateID: 'base', volumeMounts: [{ name: 'v', path: 'relative' }] }, /^volumeMounts\[0\]\.path must match pattern/],
        ['POST', '/v2/sandboxes', { templateID: 'base', network: { maskRequestHost: 'evil\r\nX-Injected: 1' } }, /^network\.maskRequestHost must match pattern/],
        ['POST', '/v2/sandboxes', [], /^request body must be object$/],
        ['GET', '/v2/sandboxes?limit=abc', undefined, /^query parameter limit must be integer$/],
        ['GET', '/v2/sandboxes?limit=0', undefined, /^query parameter limit must be >= 1$/],
        ['GET', '/v2/sandboxes?state=running,nope', undefined, /^query parameter state\[0\] must match pattern/],
        ['GET', '/v2/sandboxes?order=sideways', undefined, /^query parameter order must be one of asc, desc$/],
        ['GET', '/v2/sandboxes?startedAfter=yesterday', undefined, /^query parameter startedAfter must match format "date-time"$/],
        ['GET', '/sandboxes/x/metrics?start=-1', undefined, /^query parameter start must be >= 0$/],
        ['POST', '/sandboxes/x/timeout', {}, /^timeout is required$/],
        ['POST', '/sandboxes/x/connect', { timeout: 1.5 }, /^timeout must be integer/],
        ['POST', '/svc/sandbox/refresh', { duration: 5 }, /^sandbox_id is required$/],
        ['POST', '/nodes/n1/labels', { labels: { a: 1 } }, /^labels\.a must be string$/],
      ];
      const before = p.node.calls.length;
      for (const [method, path, body, message] of refused) {
        const r = await p.call(method, path, body);
        assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(body)}`);
        assert.deepEqual(Object.keys(r.body).sort(), ['code', 'message']);
        assert.match(r.body.message, message, `${method} ${path} ${JSON.stringify(body)}`);
      }
      assert.equal(p.node.calls.length, before, 'nothing reached a node');
      // An optional body may be left out; a repeated or comma-separated state is one list.
      assert.equal((await p.call('POST', '/sandboxes/inosuchsandbox0000000/connect')).status, 404);
      assert.equal((await p.call('GET', '/v2/sandboxes?state=running&state=paused&limit=2')).status, 200);
      assert.equal((await p.call('GET', '/v2/sandboxes?state=running,paused')).status, 200);
    });

    await t.test('answers carry the contract\'s fields and no others', async () => {
      const made = await p.call('POST', '/v2/sandboxes', { templateID: 'base', metadata: { who: 'contract' } });
      const allowed = (name: keyof typeof PublicSchemas) => new Set(Object.keys((PublicSchemas[name] as { properties: object }).properties));
      for (const k of Object.keys(made.body)) assert.ok(allowed('Sandbox').has(k), `Sandbox.${k}`);
      const detail = await p.call('GET', `/sandboxes/${made.body.sandboxID}`);
      for (const k of Object.keys(detail.body)) assert.ok(allowed('SandboxDetail').has(k), `SandboxDetail.${k}`);
      for (const k of ['domain', 'network', 'lifecycle', 'allowInternetAccess', 'metadata', 'state']) assert.ok(k in detail.body, k);
      const listed = await p.call('GET', '/v2/sandboxes?metadata=who%3Dcontract');
      assert.equal(listed.body.length, 1);
      for (const k of Object.keys(listed.body[0])) assert.ok(allowed('ListedSandbox').has(k), `ListedSandbox.${k}`);
      assert.ok(!('envdAccessToken' in listed.body[0]), 'a list does not hand out access tokens');
      await p.call('DELETE', `/sandboxes/${made.body.sandboxID}`);
    });

    await t.test('bounds: every field is checked before anything starts; secure by default', async () => {
      const before = p.node.calls.length;
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{ templateID: 'base', timeout: 9007199254740992 }, /timeout/],
        [{ templateID: 'base', timeout: -2 }, /timeout/],
        [{ templateID: 'base', timeout: 1.5 }, /timeout/],
        [{ templateID: 'x'.repeat(300) }, /templateID/],
        [{ templateID: 'ba\u0000se' }, /templateID/],
        [{ templateID: 'base', metadata: Object.fromEntries(Array.from({ length: 257 }, (_, i) => [`k${i}`, ''])) }, /metadata/],
        [{ templateID: 'base', metadata: { ['k'.repeat(300)]: 'v' } }, /metadata key/],
        [{ templateID: 'base', envVars: { 'A=B': 'x' } }, /envVars/],
        [{ templateID: 'base', envVars: { '1A': 'x' } }, /envVars/],
        [{ templateID: 'base', envVars: { A: 'x\u0000y' } }, /envVars\.A/],
        [{ templateID: 'base', network: { allowOut: ['x'.repeat(300)] } }, /network\.allowOut\[0\]/],
        [{ templateID: 'base', volumeMounts: [{ name: 'v', path: '/a/../b' }] }, /volumeMounts\[0\]\.path/],
        [{ templateID: 'base', cpuCount: 100000 }, /cpuCount/],
        [{ templateID: 'base', memoryMB: 1 }, /memoryMB/],
      ];
      for (const [body, field] of cases) {
        const r = await p.call('POST', '/v2/sandboxes', body);
        assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
        assert.match(r.body.message, field);
      }
      assert.equal(p.node.calls.length, before, 'no bad create reached the node');
      assert.equal((await p.call('GET', '/sandboxes')).status, 200);
      const plain = await p.call('POST', '/v2/sandboxes', { templateID: 'base', timeout: 2147483647 });
      assert.equal(plain.status, 201);
      assert.ok(plain.body.envdAccessToken, 'a create that does not say secure=false is secured');
      const open = await p.call('POST', '/v2/sandboxes', { templateID: 'base', secure: false });
      assert.equal(open.body.envdAccessToken, undefined, 'explicit secure=false opts out');
      for (const id of [plain.body.sandboxID, open.body.sandboxID]) await p.call('DELETE', `/sandboxes/${id}`);
      const far = await p.call('POST', `/sandboxes/${plain.body.sandboxID}/timeout`, { timeout: 9007199254740992 });
      assert.ok(far.status === 400 || far.status === 410);
    });
  } finally {
    await p.close();
  }
});

test('API gateway: operator auth callback receives X-Request-Path and X-Request-Method', async () => {
  const seen: Array<{ path?: string; method?: string }> = [];
  const cb = createServer((req, res) => {
    const path = req.headers['x-request-path'] as string;
    seen.push({ path, method: req.headers['x-request-method'] as string });
    res.statusCode = path.startsWith('/nodes') ? 403 : 200;
    res.end();
  });
  await new Promise<void>((r) => cb.listen(0, '127.0.0.1', r));
  const p = await platform({ callback: `http://127.0.0.1:${(cb.address() as { port: number }).port}/auth` });
  try {
    assert.equal((await p.call('GET', '/v2/sandboxes?limit=5')).status, 200);
    assert.deepEqual(seen.at(-1), { path: '/v2/sandboxes', method: 'GET' });
    assert.equal((await p.call('GET', '/nodes')).status, 403);
  } finally {
    await p.close();
    cb.close();
  }
});
