/**
 * The node agent's routes check bodies and the logs query against their schemas
 * (contracts/node-agent-schemas.ts) before a handler runs: a bad one is a 400 whose message
 * names the field; what the agent has always taken it still takes, and fills in (validate.ts).
 * The real fastify app and routes, with the sandboxes and artifacts standing in.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, silentLogger } from '@svc/common';
import type { CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { registerRoutes, type RouteDeps } from './routes.ts';

const SHA = 'A'.repeat(64);

/** An app whose sandboxes and artifacts record what the handlers hand them. */
async function agent() {
  const seen: Array<{ op: string; args: unknown[] }> = [];
  const record = (op: string, answer: unknown = {}) => async (...args: unknown[]) => { seen.push({ op, args }); return answer; };
  const sandboxes = {
    create: record('create'), pause: record('pause'), resume: record('resume'), snapshot: record('snapshot'), updateNetwork: record('updateNetwork'),
    exec: record('exec', { exitCode: 0, stdout: '', stderr: '' }), logs: record('logs', { logs: [] }),
  };
  const artifacts = { ensure: record('ensure') };
  const app = createHttpApp({ logger: silentLogger() });
  registerRoutes(app, { sandboxes, artifacts, createDefaults: { diskSizeMB: 100, timeoutMs: 5000 } } as unknown as RouteDeps);
  await app.ready();
  const send = async (method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown, contentType = 'application/json') => {
    seen.length = 0;
    const payload = body === undefined ? undefined : typeof body === 'string' && contentType !== 'application/json' ? body : JSON.stringify(body);
    const res = await app.inject({ method, url, ...(payload === undefined ? {} : { payload, headers: { 'content-type': contentType } }) });
    const answer = res.statusCode === 400 ? (res.json() as { message: string }) : undefined;
    return { status: res.statusCode, message: answer?.message, handed: seen[0]?.args };
  };
  return { app, send };
}

const create = (o: Record<string, unknown> = {}) => ({
  sandboxId: 'ixyz', templateId: 't', cpuCount: 1, memoryMB: 128,
  artifact: { artifactId: 'a1', sha256: SHA, sizeBytes: 1, downloadUrl: 'http://x/a' },
  ...o,
});

/** Each case: route, body, and the message it must get (a 400). */
const refused: Array<[string, 'POST' | 'PUT', string, unknown, string]> = [
  // a wrong type
  ['create: cpuCount a string', 'POST', '/v1/sandboxes', create({ cpuCount: '1' }), 'cpuCount must be integer'],
  ['create: cpuCount out of range', 'POST', '/v1/sandboxes', create({ cpuCount: 0 }), 'cpuCount must be >= 1'],
  ['create: allowInternetAccess a string', 'POST', '/v1/sandboxes', create({ allowInternetAccess: 'yes' }), 'allowInternetAccess must be boolean'],
  ['create: an env value a number', 'POST', '/v1/sandboxes', create({ envVars: { A: 1 } }), 'envVars.A must be string'],
  ['create: an env name with a space', 'POST', '/v1/sandboxes', create({ envVars: { 'BAD NAME': 'x' } }), 'envVars must match pattern "^[A-Za-z_][A-Za-z0-9_]*$"'],
  ['create: a metadata value with NUL', 'POST', '/v1/sandboxes', create({ metadata: { k: 'a\0b' } }), 'metadata.k must match pattern "^[^\\u0000]*$"'],
  ['create: a bad sandbox id', 'POST', '/v1/sandboxes', create({ sandboxId: '../x' }), 'sandboxId must match pattern "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"'],
  ['create: a bad artifact id', 'POST', '/v1/sandboxes', create({ artifact: { ...create().artifact, artifactId: '../../etc' } }), 'artifact.artifactId must match pattern "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"'],
  ['create: a short sha256', 'POST', '/v1/sandboxes', create({ artifact: { ...create().artifact, sha256: 'abc' } }), 'artifact.sha256 must match pattern "^[0-9a-fA-F]{64}$"'],
  ['create: a network list of numbers', 'POST', '/v1/sandboxes', create({ network: { allowOut: [1] } }), 'network.allowOut[0] must be string'],
  ['create: a steer entry without its scheme', 'POST', '/v1/sandboxes', create({ network: { steer: [{ port: 80 }] } }), 'network.steer[0].scheme is required'],
  ['create: an unknown runtime', 'POST', '/v1/sandboxes', create({ runtime: 'docker' }), 'runtime must be one of gvisor, microvm'],
  ['create: an unknown layer content', 'POST', '/v1/sandboxes', create({ layer: { layerId: 'l1', sha256: SHA, sizeBytes: 1, contents: 'disk' } }), 'layer.contents must be one of filesystem, memory'],
  ['create: a relative workdir', 'POST', '/v1/sandboxes', create({ defaultWorkdir: 'tmp' }), 'defaultWorkdir must match pattern "^/[^\\u0000]*$"'],
  ['create: a volume without its path', 'POST', '/v1/sandboxes', create({ volumes: [{ volumeId: 'v', driver: 'local' }] }), 'volumes[0].path is required'],
  ['pause: memory a string', 'POST', '/v1/sandboxes/s1/pause', { memory: 'no' }, 'memory must be boolean'],
  ['resume: an empty envd token', 'POST', '/v1/sandboxes/s1/resume', { envdAccessToken: '' }, 'envdAccessToken must NOT have fewer than 1 characters'],
  ['snapshot: memory a number', 'POST', '/v1/sandboxes/s1/snapshot', { layerId: 'l1', memory: 1 }, 'memory must be boolean'],
  ['network: allowInternetAccess null', 'PUT', '/v1/sandboxes/s1/network', { allowInternetAccess: null }, 'allowInternetAccess must be boolean'],
  ['exec: a blank command', 'POST', '/v1/sandboxes/s1/exec', { command: '  ' }, 'command must match pattern "\\S"'],
  ['exec: timeoutMs 0', 'POST', '/v1/sandboxes/s1/exec', { command: 'true', timeoutMs: 0 }, 'timeoutMs must be >= 1'],
  ['exec: an ftp stdin', 'POST', '/v1/sandboxes/s1/exec', { command: 'cat', stdin: { url: 'ftp://x', sha256: SHA, sizeBytes: 1 } }, 'stdin.url must match pattern "^(/|https?://)"'],
  ['artifact: a relative localPath', 'POST', '/v1/artifacts/a1', { sha256: SHA, downloadUrl: 'http://x/a', localPath: 'a.ext4' }, 'localPath must match pattern "^/"'],
  ['artifact: sizeBytes negative', 'POST', '/v1/artifacts/a1', { sha256: SHA, downloadUrl: 'http://x/a', sizeBytes: -1 }, 'sizeBytes must be >= 0'],
  // a missing required field
  ['create: no sandboxId', 'POST', '/v1/sandboxes', { ...create(), sandboxId: undefined }, 'sandboxId is required'],
  ['create: no artifact', 'POST', '/v1/sandboxes', { ...create(), artifact: undefined }, 'artifact is required'],
  ['create: an artifact without its id', 'POST', '/v1/sandboxes', create({ artifact: { sha256: SHA, downloadUrl: 'http://x/a' } }), 'artifact.artifactId is required'],
  ['create: no memoryMB', 'POST', '/v1/sandboxes', { ...create(), memoryMB: undefined }, 'memoryMB is required'],
  ['create: a layer without its size', 'POST', '/v1/sandboxes', create({ layer: { layerId: 'l1', sha256: SHA } }), 'layer.sizeBytes is required'],
  ['snapshot: no layerId', 'POST', '/v1/sandboxes/s1/snapshot', { memory: true }, 'layerId is required'],
  ['network: no allowInternetAccess', 'PUT', '/v1/sandboxes/s1/network', { network: { allowOut: [] } }, 'allowInternetAccess is required'],
  ['exec: no command', 'POST', '/v1/sandboxes/s1/exec', { user: 'root' }, 'command is required'],
  ['exec: stdin without its sha256', 'POST', '/v1/sandboxes/s1/exec', { command: 'cat', stdin: { url: '/x', sizeBytes: 1 } }, 'stdin.sha256 is required'],
  ['artifact: no downloadUrl', 'POST', '/v1/artifacts/a1', { sha256: SHA }, 'downloadUrl is required'],
  // a body that is not an object
  ['create: a list', 'POST', '/v1/sandboxes', [create()], 'request body must be object'],
  ['create: null', 'POST', '/v1/sandboxes', null, 'request body must be object'],
  ['pause: a number', 'POST', '/v1/sandboxes/s1/pause', 5, 'request body must be object or null'],
  ['resume: a list', 'POST', '/v1/sandboxes/s1/resume', [], 'request body must be object or null'],
  ['snapshot: a string', 'POST', '/v1/sandboxes/s1/snapshot', 'l1', 'request body must be object'],
  ['network: true', 'PUT', '/v1/sandboxes/s1/network', true, 'request body must be object'],
  ['exec: a string', 'POST', '/v1/sandboxes/s1/exec', 'true', 'request body must be object'],
  ['artifact: a list', 'POST', '/v1/artifacts/a1', [], 'request body must be object'],
  ['create: network a list', 'POST', '/v1/sandboxes', create({ network: [] }), 'network must be object or null'],
  ['create: layer null', 'POST', '/v1/sandboxes', create({ layer: null }), 'layer must be object'],
  ['exec: stdin a string', 'POST', '/v1/sandboxes/s1/exec', { command: 'cat', stdin: '/x' }, 'stdin must be object'],
];

test('a bad body is a 400 naming the field, before the handler runs', async (t) => {
  const { app, send } = await agent();
  try {
    for (const [name, method, url, body, message] of refused) {
      await t.test(name, async () => {
        const r = await send(method, url, body);
        assert.deepEqual({ status: r.status, message: r.message }, { status: 400, message });
        assert.equal(r.handed, undefined, 'the handler did not run');
      });
    }
  } finally {
    await app.close();
  }
});

test('what the agent has always taken it takes: other fields let through unread, nulls and absent fields filled in', async () => {
  const { app, send } = await agent();
  try {
    const full = await send('POST', '/v1/sandboxes', create({ surprise: 1, artifact: { ...create().artifact, extra: true } }));
    assert.equal(full.status, 201);
    const req = full.handed![0] as CreateSandboxOnNode;
    assert.deepEqual(req, {
      sandboxId: 'ixyz', templateId: 't', cpuCount: 1, memoryMB: 128, diskSizeMB: 100, timeoutMs: 5000,
      artifact: { artifactId: 'a1', sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://x/a' },
      envVars: {}, envdAccessToken: undefined, allowInternetAccess: true, network: { allowOut: [], denyOut: [], steer: [] }, metadata: {},
    });
    const nulls = await send('POST', '/v1/sandboxes', create({ envVars: null, metadata: null, network: { allowOut: null, denyOut: ['10.0.0.0/8'], steer: null }, volumes: null }));
    assert.equal(nulls.status, 201);
    assert.deepEqual((nulls.handed![0] as CreateSandboxOnNode).network, { allowOut: [], denyOut: ['10.0.0.0/8'], steer: [] });
    assert.deepEqual((nulls.handed![0] as CreateSandboxOnNode).volumes, []);
    assert.equal((await send('POST', '/v1/sandboxes', create({ network: null }))).status, 201);

    // The whole of a mount list is volumes.ts's check: one volume twice is refused there.
    const mount = { volumeId: 'v1', driver: 'local', path: '/data' };
    const twice = await send('POST', '/v1/sandboxes', create({ volumes: [mount, { ...mount, path: '/other' }] }));
    assert.equal(twice.status, 400);
    assert.match(twice.message!, /mounted twice/);

    for (const [body, contentType] of [[undefined, undefined], [null, 'application/json'], ['', 'text/plain'], [{}, 'application/json'], [{ other: 1 }, 'application/json']] as const) {
      const r = await send('POST', '/v1/sandboxes/s1/pause', body, contentType);
      assert.deepEqual([r.status, r.handed], [200, ['s1', {}]], `pause ${JSON.stringify(body)} as ${contentType}`);
      const resumed = await send('POST', '/v1/sandboxes/s1/resume', body, contentType);
      assert.deepEqual([resumed.status, resumed.handed], [200, ['s1', {}]], `resume ${JSON.stringify(body)} as ${contentType}`);
    }
    assert.deepEqual((await send('POST', '/v1/sandboxes/s1/resume', { memory: false, envVars: null, volumes: null })).handed, ['s1', { memory: false, envVars: {}, volumes: [] }]);

    const exec = await send('POST', '/v1/sandboxes/s1/exec', { command: 'true', other: 1, stdin: { url: '/blob', sha256: SHA, sizeBytes: 2, other: 1 } });
    assert.equal(exec.status, 200);
    assert.deepEqual(exec.handed!.slice(0, 2), ['s1', { command: 'true', user: 'root', envVars: {}, timeoutMs: 600_000, stdin: { url: '/blob', sha256: 'a'.repeat(64), sizeBytes: 2 } }]);

    assert.deepEqual((await send('PUT', '/v1/sandboxes/s1/network', { allowInternetAccess: false, network: null })).handed,
      ['s1', { allowInternetAccess: false, network: { allowOut: [], denyOut: [], steer: [] } }]);
    assert.deepEqual((await send('POST', '/v1/sandboxes/s1/snapshot', { layerId: 'l1', other: 1 })).handed, ['s1', { layerId: 'l1' }]);
    assert.deepEqual((await send('POST', '/v1/artifacts/a1', { sha256: SHA, downloadUrl: 'http://x/a', localPath: '/a.ext4' })).handed,
      ['a1', { sha256: 'a'.repeat(64), sizeBytes: 0, downloadUrl: 'http://x/a', localPath: '/a.ext4' }]);

    // What has no schema, a path's id, is still checked.
    const badId = await send('POST', '/v1/sandboxes/bad!id/pause');
    assert.equal(badId.status, 400);
    assert.match(badId.message!, /sandbox id "bad!id" is not valid/);
    assert.match((await send('POST', '/v1/artifacts/bad!id', { sha256: SHA, downloadUrl: 'http://x/a' })).message!, /artifact id "bad!id" is not valid/);
  } finally {
    await app.close();
  }
});

test('the logs query: text coerced and checked, 400 naming the parameter; an empty parameter is an absent one', async (t) => {
  const { app, send } = await agent();
  try {
    const logs = (q: string) => send('GET', `/v1/sandboxes/s1/logs${q}`);
    assert.deepEqual((await logs('')).handed, ['s1', { limit: 1000, direction: 'forward' }]);
    assert.deepEqual((await logs('?cursor=5&limit=10&direction=backward&level=warn&search=x&other=1')).handed,
      ['s1', { cursor: 5, limit: 10, direction: 'backward', level: 'warn', search: 'x' }]);
    assert.deepEqual((await logs('?cursor=&limit=&direction=&level=&search=')).handed, ['s1', { limit: 1000, direction: 'forward' }]);
    for (const [q, message] of [
      ['?limit=0', 'query parameter limit must be >= 1'],
      ['?limit=1001', 'query parameter limit must be <= 1000'],
      ['?limit=abc', 'query parameter limit must be integer'],
      ['?cursor=-1', 'query parameter cursor must be >= 0'],
      ['?cursor=1&cursor=2', 'query parameter cursor must be integer'],
      ['?direction=sideways', 'query parameter direction must be one of forward, backward'],
      ['?level=loud', 'query parameter level must be one of debug, info, warn, error'],
      [`?search=${'x'.repeat(257)}`, 'query parameter search must NOT have more than 256 characters'],
    ] as const) {
      await t.test(q.slice(0, 40), async () => {
        const r = await logs(q);
        assert.deepEqual({ status: r.status, message: r.message, handed: r.handed }, { status: 400, message, handed: undefined });
      });
    }
  } finally {
    await app.close();
  }
});
