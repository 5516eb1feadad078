import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  AuthenticationError, ConflictError, InvalidArgumentError, NEVER_TIMEOUT, NotFoundError, RateLimitError, Sandbox, SandboxError,
  SandboxNotFoundError, ServiceBusyError, GoneError,
} from './index.ts';
import { startFakeApi, type FakeApi } from './testing/fake-api.ts';
import { startFakeEnvd, type FakeEnvd } from './testing/fake-envd.ts';
import { ErrorCodes } from '@svc/common';

let api: FakeApi;
let envd: FakeEnvd;
let conn: { apiUrl: string; apiKey: string; sandboxUrl: string };

before(async () => {
  api = await startFakeApi({ apiKey: 'k-123' });
  envd = await startFakeEnvd();
  conn = { apiUrl: api.url, apiKey: 'k-123', sandboxUrl: envd.url };
});
after(async () => {
  await api.close();
  await envd.close();
});

describe('Sandbox.create', () => {
  test('sends the E2B body and keeps the tokens', async () => {
    const sbx = await Sandbox.create('base', {
      ...conn,
      timeoutMs: 90_500,
      metadata: { owner: 'me' },
      envs: { A: '1' },
      allowInternetAccess: false,
      lifecycle: { onTimeout: 'pause', autoResume: true },
      volumeMounts: { '/data': 'vol-1', '/ro': { name: 'vol-2', readOnly: true } },
      network: { allowPublicTraffic: false, allowOut: ['1.1.1.1'] },
    });
    const body = api.lastCreate()!;
    assert.equal(body.templateID, 'base');
    assert.equal(body.timeout, 91, 'milliseconds become whole seconds, rounded up');
    assert.deepEqual(body.metadata, { owner: 'me' });
    assert.deepEqual(body.envVars, { A: '1' });
    assert.equal(body.allow_internet_access, false);
    assert.deepEqual(body.lifecycle, { onTimeout: 'pause', autoResume: true });
    assert.deepEqual(body.volumeMounts, [{ name: 'vol-1', path: '/data' }, { name: 'vol-2', path: '/ro', readOnly: true }]);
    assert.deepEqual(body.network, { allowOut: ['1.1.1.1'], allowPublicTraffic: false });
    const last = api.requests[api.requests.length - 1];
    assert.equal(last.url, '/v2/sandboxes');
    assert.equal(last.headers['x-api-key'], 'k-123');
    assert.match(sbx.sandboxId, /^sbx-/);
    assert.ok(sbx.trafficAccessToken, 'a private sandbox has a traffic token');
    assert.equal(await sbx.isRunning(), true);
    const health = envd.requests[envd.requests.length - 1];
    assert.equal(health.headers['e2b-sandbox-id'], sbx.sandboxId);
    assert.equal(health.headers['e2b-sandbox-port'], '49983');
    assert.equal(health.headers['x-access-token'], api.sandboxes.get(sbx.sandboxId)!.envdAccessToken);
    assert.equal(health.headers['svc-traffic-access-token'], sbx.trafficAccessToken);
  });

  test('NEVER_TIMEOUT is sent as -1 seconds and 0 as 0', async () => {
    await Sandbox.create({ ...conn, timeoutMs: NEVER_TIMEOUT });
    assert.equal(api.lastCreate()!.timeout, -1);
    await Sandbox.create({ ...conn, timeoutMs: 0 });
    assert.equal(api.lastCreate()!.timeout, 0);
    await Sandbox.create({ ...conn });
    assert.equal('timeout' in api.lastCreate()!, false, 'omitted timeout is not sent');
  });

  test('template defaults to SVC_TEMPLATE_ID, then base', async () => {
    await Sandbox.create({ ...conn });
    assert.equal(api.lastCreate()!.templateID, 'base');
    process.env.SVC_TEMPLATE_ID = 'custom';
    try {
      await assert.rejects(Sandbox.create({ ...conn }), (e: unknown) => e instanceof NotFoundError && (e as NotFoundError).code === ErrorCodes.templateNotFound);
      assert.equal(api.lastCreate()!.templateID, 'custom');
    } finally {
      delete process.env.SVC_TEMPLATE_ID;
    }
  });

  test('endpoint and key come from the environment', async () => {
    process.env.SVC_API_URL = api.url;
    process.env.SVC_API_KEY = 'k-123';
    try {
      const sbx = await Sandbox.create();
      assert.ok(sbx.sandboxId);
    } finally {
      delete process.env.SVC_API_URL;
      delete process.env.SVC_API_KEY;
    }
  });

  test('a wrong key is an AuthenticationError with status and code', async () => {
    await assert.rejects(Sandbox.create({ ...conn, apiKey: 'wrong' }), (e: unknown) => {
      assert.ok(e instanceof AuthenticationError);
      assert.equal(e.status, 401);
      assert.equal(e.statusCode, 401);
      assert.equal(e.code, 401);
      assert.match(e.message, /invalid API key/);
      return true;
    });
  });

  test('e2b-style header transforms are sent as e2b sends them; bad rules are refused locally', async () => {
    await Sandbox.create({
      ...conn,
      network: {
        allowOut: ({ rules }) => [...rules.keys()],
        rules: { 'api.example.com': [{ transform: { headers: { Authorization: 'Bearer s3cret' } } }] },
      },
    });
    assert.deepEqual(api.lastCreate()!.network, {
      allowOut: ['api.example.com'],
      rules: { 'api.example.com': [{ transform: { headers: { Authorization: 'Bearer s3cret' } } }] },
    });
    const before = api.requests.length;
    await assert.rejects(
      Sandbox.create({ ...conn, network: { rules: [{ match: { host: 'a.com', port: 8443 }, action: { allow: true } }] } }),
      InvalidArgumentError,
    );
    await assert.rejects(
      Sandbox.create({ ...conn, network: { rules: [{ match: { host: '10.0.0.0/8' }, action: { allow: false } }] } }),
      /CIDR/,
    );
    await assert.rejects(
      Sandbox.create({
        ...conn,
        network: {
          rules: [
            { match: { host: 'a.com', port: 8080, scheme: 'http' }, action: { allow: true } },
            { match: { host: 'a.com', port: 8080, scheme: 'https' }, action: { allow: true } },
          ],
        },
      }),
      /disagree on the scheme/,
    );
    await assert.rejects(Sandbox.create({ ...conn, lifecycle: { onTimeout: 'kill', autoResume: true } }), InvalidArgumentError);
    assert.equal(api.requests.length, before, 'nothing reached the server');
  });
});

describe('pause kinds', () => {
  test("onTimeout {action: 'pause', keepMemory} is sent as e2b sends it; keepMemory false with autoResume is refused locally", async () => {
    await Sandbox.create({ ...conn, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } });
    assert.deepEqual(api.lastCreate(), { templateID: 'base', lifecycle: { onTimeout: 'pause' }, autoPauseMemory: false });
    await Sandbox.create({ ...conn, lifecycle: { onTimeout: { action: 'pause', keepMemory: true }, autoResume: true } });
    assert.deepEqual(api.lastCreate(), { templateID: 'base', lifecycle: { onTimeout: 'pause', autoResume: true }, autoPauseMemory: true });
    await Sandbox.create({ ...conn, lifecycle: { onTimeout: { action: 'pause' } } });
    assert.deepEqual(api.lastCreate(), { templateID: 'base', lifecycle: { onTimeout: 'pause' } }, 'no keepMemory: the server\'s default');
    await Sandbox.create({ ...conn, lifecycle: { onTimeout: { action: 'kill' } } });
    assert.deepEqual(api.lastCreate(), { templateID: 'base', lifecycle: { onTimeout: 'kill' } });

    const before = api.requests.length;
    await assert.rejects(
      Sandbox.create({ ...conn, lifecycle: { onTimeout: { action: 'pause', keepMemory: false }, autoResume: true } }),
      (e: unknown) => e instanceof InvalidArgumentError && /autoResume cannot be true with onTimeout.keepMemory false/.test(e.message),
    );
    await assert.rejects(Sandbox.create({ ...conn, lifecycle: { onTimeout: { action: 'kill', keepMemory: false } as never } }), /only allowed when the action is 'pause'/);
    await assert.rejects(Sandbox.create({ ...conn, lifecycle: { onTimeout: { action: 'sleep' } as never } }), /onTimeout.action must be 'kill' or 'pause'/);
    assert.equal(api.requests.length, before, 'nothing reached the server');
  });

  test("pause({keepMemory: false}) sends memory false; connect({onResume: 'reboot'}) sends memory false; other onResume values are refused", async () => {
    const sbx = await Sandbox.create({ ...conn });
    assert.equal(await sbx.pause({ keepMemory: false }), true);
    assert.deepEqual(api.requests.at(-1)!.body, { memory: false });
    assert.equal((await sbx.getInfo()).pauseKind, 'filesystem');
    await sbx.connect({ onResume: 'reboot', timeoutMs: 30_000 });
    assert.deepEqual(api.requests.at(-1)!.body, { timeout: 30, memory: false });
    await Sandbox.connect(sbx.sandboxId, { ...conn, onResume: 'restore' });
    assert.deepEqual(api.requests.at(-1)!.body, {}, "'restore' is the default and is not sent");

    await Sandbox.pause(sbx.sandboxId, conn);
    assert.equal(api.requests.at(-1)!.body, undefined, 'a plain pause sends no body');
    assert.equal((await sbx.getInfo()).pauseKind, 'freeze');
    const before = api.requests.length;
    await assert.rejects(sbx.connect({ onResume: 'reboot-now' as never }), InvalidArgumentError);
    await assert.rejects(Sandbox.resume(sbx.sandboxId, { ...conn, onResume: 'cold' as never }), /onResume must be 'restore' or 'reboot'/);
    assert.equal(api.requests.length, before, 'nothing reached the server');
    await sbx.resume({ onResume: 'reboot' });
    assert.deepEqual(api.requests.at(-1)!.body, { memory: false });
  });
});

describe('sandbox lifecycle', () => {
  test('getInfo, setTimeout, pause, connect, resume, metrics, kill', async () => {
    const sbx = await Sandbox.create({ ...conn, metadata: { k: 'v' }, timeoutMs: 60_000 });
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.state, 'running');
    assert.deepEqual(info.metadata, { k: 'v' });
    assert.ok(info.startedAt instanceof Date);
    assert.ok(info.endAt instanceof Date);

    await sbx.setTimeout(NEVER_TIMEOUT);
    assert.equal(api.sandboxes.get(sbx.sandboxId)!.timeout, -1);
    assert.equal((await sbx.getInfo()).endAt, undefined, 'no endAt when the sandbox never times out');

    assert.equal(await sbx.pause(), true);
    assert.equal(await sbx.pause(), false, 'already paused');
    assert.equal((await Sandbox.getInfo(sbx.sandboxId, conn)).state, 'paused');

    const again = await Sandbox.connect(sbx.sandboxId, { ...conn, timeoutMs: 120_000 });
    assert.equal(again.sandboxId, sbx.sandboxId);
    assert.equal(api.sandboxes.get(sbx.sandboxId)!.state, 'running');
    assert.deepEqual(api.requests[api.requests.length - 1].body, { timeout: 120 });
    assert.equal(api.requests[api.requests.length - 1].url, `/v2/sandboxes/${sbx.sandboxId}/connect`);

    await sbx.connect();
    assert.deepEqual(api.requests[api.requests.length - 1].body, {}, 'omitted timeout keeps the current one');
    await assert.rejects(Sandbox.connect(sbx.sandboxId, { ...conn, timeoutMs: 0 }), InvalidArgumentError);

    await sbx.pause();
    await sbx.resume({ timeoutMs: 30_000 });
    assert.equal(api.sandboxes.get(sbx.sandboxId)!.timeout, 30);
    await assert.rejects(sbx.resume(), ConflictError, 'resume of a running sandbox is a conflict');

    const metrics = await sbx.getMetrics();
    assert.equal(metrics.length, 1);
    assert.ok(metrics[0].timestamp instanceof Date);

    assert.equal(await sbx.kill(), true);
    assert.equal(await Sandbox.kill(sbx.sandboxId, conn), false);
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId, conn), SandboxNotFoundError);
    await assert.rejects(Sandbox.connect(sbx.sandboxId, conn), SandboxNotFoundError);
  });

  test('list pages with nextToken and filters by metadata and state', async () => {
    for (const s of [...api.sandboxes.keys()]) api.sandboxes.delete(s);
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await Sandbox.create({ ...conn, metadata: { group: i < 3 ? 'a' : 'b', 'x y': 'p&q=100%' } }));
    await made[0].pause();

    const pager = Sandbox.list({ ...conn, limit: 2 });
    const seen: string[] = [];
    while (pager.hasNext) seen.push(...(await pager.nextItems()).map((s) => s.sandboxId));
    assert.equal(seen.length, 5);
    assert.equal(new Set(seen).size, 5);
    await assert.rejects(pager.nextItems(), /no more items/);

    const groupA = await Sandbox.list({ ...conn, query: { metadata: { group: 'a', 'x y': 'p&q=100%' } } }).nextItems();
    assert.equal(groupA.length, 3);
    const paused = await Sandbox.list({ ...conn, query: { state: ['paused'] } }).nextItems();
    assert.deepEqual(paused.map((s) => s.sandboxId), [made[0].sandboxId]);
    const listUrl = api.requests[api.requests.length - 1].url;
    assert.match(listUrl, /state=paused/);
  });

  test('getHost uses the API domain, else the data-plane host', async () => {
    const sbx = await Sandbox.create({ ...conn });
    assert.equal(sbx.getHost(8080), `8080-${sbx.sandboxId}.localhost:${new URL(envd.url).port}`);
    const withDomain = new Sandbox({ ...conn, sandboxId: 'sbx-x', sandboxDomain: 'svc.example', envdVersion: '0.6.4' });
    assert.equal(withDomain.getHost(3000), '3000-sbx-x.svc.example');
  });
});

describe('errors', () => {
  test('HTTP statuses map to typed errors carrying status and code', async () => {
    const { errorFromHttp } = await import('./errors.ts');
    const gone = errorFromHttp(410, '{"code":410,"message":"sandbox was killed"}');
    assert.ok(gone instanceof GoneError);
    assert.equal(gone.message, 'sandbox was killed');
    const busy = errorFromHttp(503, { code: 503, message: 'pausing' }, { retryAfter: '2' });
    assert.ok(busy instanceof ServiceBusyError);
    assert.equal((busy as ServiceBusyError).retryAfterSec, 2);
    const conflict = errorFromHttp(409, { code: 130409, message: 'resume rejected' });
    assert.ok(conflict instanceof ConflictError);
    assert.equal(conflict.code, 130409);
    assert.equal(conflict.status, 409);
  });

  test("a fork's error entry maps by its code as an answer's status would", async () => {
    const { errorFromBody } = await import('./errors.ts');
    const notFound = errorFromBody({ code: 404, message: 'template gone' }, 'fallback');
    assert.ok(notFound instanceof NotFoundError && !(notFound instanceof SandboxNotFoundError));
    assert.equal(notFound.message, 'template gone');
    assert.equal(notFound.status, 404);
    assert.ok(errorFromBody({ code: 429, message: 'slow down' }, 'x') instanceof RateLimitError);
    assert.ok(errorFromBody({ code: 503, message: 'no node' }, 'x') instanceof ServiceBusyError);
    const odd = errorFromBody({ code: 130409, message: 'refused' }, 'x');
    assert.equal(odd.constructor, SandboxError);
    assert.equal(odd.code, 130409);
    assert.equal(errorFromBody(undefined, 'fork 1 did not start').message, 'fork 1 did not start');
  });

  test('an unreachable API is a clear error', async () => {
    await assert.rejects(Sandbox.getInfo('x', { apiUrl: 'http://127.0.0.1:1' }), /cannot connect/);
  });
});
