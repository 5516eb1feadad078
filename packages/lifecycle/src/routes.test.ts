import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, silentLogger } from '@svc/common';
import { assertServesExactly } from '@svc/contracts/contract-testing';
import { LIFECYCLE_ROUTES, type ProxyAnnouncement } from '@svc/contracts/lifecycle';
import { registerRoutes, type RouteDeps } from './routes.ts';

/** An app with the lifecycle's routes over deps that note what reached them. */
async function appWith() {
  const resumed: string[] = [];
  const announced: ProxyAnnouncement[] = [];
  const deps: RouteDeps = {
    health: () => ({ ok: true, replicaId: 'r', leader: false, warmingUp: false, createEventsApplied: 0, tasks: {} }),
    resume: async (sandboxId) => { resumed.push(sandboxId); return { sandboxId, state: 'running', nodeId: 'n', address: '10.0.0.2', envdPort: 49983, autoResume: true }; },
    recordProxy: async (a) => { announced.push(a); },
  };
  const app = createHttpApp({ logger: silentLogger() });
  registerRoutes(app, deps);
  await app.ready();
  return { app, resumed, announced };
}

const post = (app: Awaited<ReturnType<typeof appWith>>['app'], url: string, body: unknown) =>
  app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });

test('the lifecycle serves exactly the routes of LIFECYCLE_ROUTES', async () => {
  const { app } = await appWith();
  assertServesExactly(app, LIFECYCLE_ROUTES);
  await app.close();
});

test('POST /internal/resume: a sandboxId that is not a non-empty string is a 400 naming it, before the resume', async () => {
  const { app, resumed } = await appWith();
  for (const [body, message] of [
    [{ sandboxId: 5 }, 'sandboxId must be string'],
    [{}, 'sandboxId is required'],
    [{ sandboxId: '' }, 'sandboxId must NOT have fewer than 1 characters'],
    [['s'], 'request body must be object'],
  ] as const) {
    const r = await post(app, LIFECYCLE_ROUTES.resume.path, body);
    assert.equal(r.statusCode, 400, JSON.stringify(body));
    assert.deepEqual(r.json(), { code: 400, message }, JSON.stringify(body));
  }
  assert.deepEqual(resumed, []);
  const ok = await post(app, LIFECYCLE_ROUTES.resume.path, { sandboxId: 'sbx-1', extra: true });
  assert.equal(ok.statusCode, 200);
  assert.deepEqual(resumed, ['sbx-1']);
  await app.close();
});

test('POST /internal/v1/proxies/heartbeat: a proxyId or adminUrl of another type or form is a 400 naming it, before anything is recorded', async () => {
  const { app, announced } = await appWith();
  const good = { proxyId: 'proxy-1:a.b_c', adminUrl: 'https://10.0.0.9:8082' };
  for (const [body, field] of [
    [{ ...good, proxyId: 5 }, /^proxyId must be string$/],
    [{ ...good, adminUrl: ['http://x'] }, /^adminUrl must be string$/],
    [{ ...good, proxyId: 'a/b' }, /^proxyId must match pattern/],
    [{ ...good, proxyId: 'p'.repeat(129) }, /^proxyId must match pattern/],
    [{ ...good, adminUrl: 'ftp://x' }, /^adminUrl must match pattern/],
    [{ proxyId: 'p' }, /^adminUrl is required$/],
  ] as const) {
    const r = await post(app, LIFECYCLE_ROUTES.proxyHeartbeat.path, body);
    assert.equal(r.statusCode, 400, JSON.stringify(body));
    assert.match(r.json().message, field, JSON.stringify(body));
  }
  assert.deepEqual(announced, []);
  const ok = await post(app, LIFECYCLE_ROUTES.proxyHeartbeat.path, good);
  assert.equal(ok.statusCode, 204);
  assert.deepEqual(announced, [good]);
  await app.close();
});

test('GET /metrics answers the process\'s metrics on the cluster\'s network, as the other routes (no token)', async () => {
  const { app } = await appWith();
  const r = await app.inject({ method: 'GET', url: LIFECYCLE_ROUTES.metrics.path });
  assert.equal(r.statusCode, 200);
  assert.match(String(r.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  assert.match(r.body, /^process_cpu_user_seconds_total \S+$/m);
  await app.close();
});
