/**
 * The contract of the node agent's sandbox routes as the master uses them, as one test suite.
 * The real node agent runs it (packages/node-agent/src/node-agent.contract.test.ts, real runsc)
 * and so does the master's FakeNodeAgent (packages/master/src/testing/fake-node-agent.contract.test.ts),
 * so a master test that passes against the fake says something about the wire.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { statusOf } from './contract-testing.ts';
import { LAYER_SHA256_HEADER, NODE_AGENT_ROUTES, NodeAgentClient, type CreateSandboxOnNode, type EnsureArtifact, type NodeSandbox } from './node-agent.ts';
import type { ServedRoute } from '@svc/common';
import { routeGaps } from './route-table.ts';
import type { SandboxLogsQuery } from './node-agent.ts';
import { LOG_LEVELS } from './sandbox-logs.ts';

export interface NodeAgentSubject {
  url: string;
  /** A fake's registered routes, each of which must be in NODE_AGENT_ROUTES (the real agent's are checked beside its server). */
  served?: () => ServedRoute[];
  /** A create request the subject can serve (a template artifact it can start). */
  createRequest(): CreateSandboxOnNode;
  close(): Promise<void>;
}

function assertSandbox(s: NodeSandbox, req: CreateSandboxOnNode, state: NodeSandbox['state']): void {
  assert.equal(s.sandboxId, req.sandboxId);
  assert.equal(s.templateId, req.templateId);
  assert.equal(s.state, state);
  assert.match(s.address, /^\d+\.\d+\.\d+\.\d+$/);
  assert.equal(typeof s.envdPort, 'number');
  assert.match(s.envdVersion, /^\d+\.\d+\.\d+/);
  assert.ok(s.runtime === 'gvisor' || s.runtime === 'microvm');
  assert.equal(s.cpuCount, req.cpuCount);
  assert.equal(s.memoryMB, req.memoryMB);
  assert.ok(!Number.isNaN(Date.parse(s.startedAt)));
}

export function nodeAgentContract(name: string, make: () => Promise<NodeAgentSubject>): void {
  test(`node agent sandbox routes contract: ${name}`, async (t) => {
    const s = await make();
    const agent = new NodeAgentClient(s.url);
    const req = s.createRequest();
    try {
      await t.test('serves no route outside NODE_AGENT_ROUTES', { skip: !s.served && 'the real agent: routes.test.ts' }, () => {
        assert.deepEqual(routeGaps(NODE_AGENT_ROUTES, s.served!()).unlisted, []);
      });

      await t.test('create answers the running sandbox; get and list show it', async () => {
        assertSandbox(await agent.createSandbox(req), req, 'running');
        assertSandbox(await agent.getSandbox(req.sandboxId), req, 'running');
        assert.ok((await agent.listSandboxes()).some((x) => x.sandboxId === req.sandboxId));
      });

      await t.test('a network update of a running sandbox answers it', async () => {
        assertSandbox(await agent.updateNetwork(req.sandboxId, { allowInternetAccess: false, network: { allowOut: ['10.0.0.1'], denyOut: [] } }), req, 'running');
      });

      await t.test('metrics are numbers', async () => {
        const m = await agent.metrics(req.sandboxId);
        for (const k of ['timestampUnix', 'cpuCount', 'cpuUsedPct', 'memUsed', 'memTotal', 'memCache', 'diskUsed', 'diskTotal'] as const) {
          assert.equal(typeof m[k], 'number', k);
        }
      });

      await t.test("logs: envd's lines with their times, oldest first, narrowed by the query, also while paused; 400 on bad input; 404 for an unknown sandbox", async () => {
        const { logs } = await agent.sandboxLogs(req.sandboxId);
        assert.ok(logs.some((e) => e.fields.logger === 'envd'), `an envd line in ${JSON.stringify(logs)}`);
        for (const e of logs) {
          assert.equal(new Date(e.timestamp).toISOString(), e.timestamp);
          assert.ok(LOG_LEVELS.includes(e.level) && typeof e.message === 'string', JSON.stringify(e));
          for (const v of Object.values(e.fields)) assert.equal(typeof v, 'string');
        }
        const times = logs.map((e) => Date.parse(e.timestamp));
        assert.deepEqual(times, [...times].sort((a, b) => a - b), 'oldest first');
        const first = logs[0]!;
        const last = logs[logs.length - 1]!;
        assert.deepEqual((await agent.sandboxLogs(req.sandboxId, { limit: 1 })).logs, [first]);
        const [newest] = (await agent.sandboxLogs(req.sandboxId, { direction: 'backward', limit: 1 })).logs;
        assert.ok(newest && Date.parse(newest.timestamp) >= Date.parse(last.timestamp), 'backward: newest first');
        assert.deepEqual((await agent.sandboxLogs(req.sandboxId, { direction: 'backward', cursor: Date.parse(first.timestamp) - 1 })).logs, []);
        assert.deepEqual((await agent.sandboxLogs(req.sandboxId, { cursor: Date.parse(last.timestamp) + 60_000 })).logs, []);
        const found = (await agent.sandboxLogs(req.sandboxId, { search: first.message })).logs;
        assert.ok(found.length > 0 && found.every((e) => e.message.includes(first.message)));
        assert.ok((await agent.sandboxLogs(req.sandboxId, { level: 'error' })).logs.every((e) => e.level === 'error'));
        await agent.pauseSandbox(req.sandboxId);
        try {
          assert.ok((await agent.sandboxLogs(req.sandboxId)).logs.length >= logs.length, 'a paused sandbox keeps its log');
        } finally {
          await agent.resumeSandbox(req.sandboxId);
        }
        const bad = { limit: ['0', '1001', 'abc'], direction: ['sideways'], level: ['loud'], cursor: ['-1'] };
        for (const [field, values] of Object.entries(bad)) {
          for (const v of values) {
            const q = { [field]: v } as unknown as SandboxLogsQuery;
            assert.equal(await statusOf(agent.sandboxLogs(req.sandboxId, q)), 400, `${field}=${v}`);
          }
        }
        assert.equal(await statusOf(agent.sandboxLogs('no-such-sandbox')), 404);
      });

      await t.test('exec runs a shell command to its end: exit code, stdout, stderr, cwd and environment; 400 on bad input, 404 unknown', async () => {
        const r = await agent.exec(req.sandboxId, { command: 'echo "out $GREETING"; pwd; echo err >&2; exit 3', cwd: '/tmp', envVars: { GREETING: 'hi' } });
        assert.deepEqual(r, { exitCode: 3, stdout: 'out hi\n/tmp\n', stderr: 'err\n' });
        assert.equal((await agent.exec(req.sandboxId, { command: 'true' })).exitCode, 0);
        for (const bad of [{ command: '' }, { command: 'true', cwd: 'relative' }, { command: 'true', user: 'no such' }, { command: 'true', timeoutMs: 0 }]) {
          assert.equal(await statusOf(agent.exec(req.sandboxId, bad)), 400, JSON.stringify(bad));
        }
        assert.equal(await statusOf(agent.exec('no-such-sandbox', { command: 'true' })), 404);
      });

      await t.test('exec hands over the output as it comes: a line printed before a pause arrives before the command ends', async () => {
        const seen: Array<[string, string, number]> = [];
        const start = Date.now();
        const r = await agent.exec(req.sandboxId, { command: 'echo early; echo warned >&2; sleep 1; echo late' }, (stream, text) => { seen.push([stream, text, Date.now() - start]); });
        assert.deepEqual(r, { exitCode: 0, stdout: 'early\nlate\n', stderr: 'warned\n' });
        assert.deepEqual(seen.map(([stream, text]) => [stream, text]).sort(), [['stderr', 'warned\n'], ['stdout', 'early\n'], ['stdout', 'late\n']]);
        const early = seen.find(([, text]) => text === 'early\n')![2];
        const end = seen.find(([, text]) => text === 'late\n')![2];
        assert.ok(end - early >= 700, `early came ${early} ms in, late ${end} ms: before the command ended`);
      });

      await t.test('exec with stdin: the node downloads the blob, checks its sha256 and size, and feeds it to the command; a mismatch is 502', async () => {
        const blob = Buffer.from('fed through stdin\n');
        const server = createServer((_q, res) => res.end(blob));
        await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
        try {
          const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/blob`;
          const stdin = { url, sha256: createHash('sha256').update(blob).digest('hex'), sizeBytes: blob.length };
          assert.deepEqual(await agent.exec(req.sandboxId, { command: 'cat; echo done', stdin }), { exitCode: 0, stdout: 'fed through stdin\ndone\n', stderr: '' });
          assert.equal(await statusOf(agent.exec(req.sandboxId, { command: 'cat', stdin: { ...stdin, sha256: 'f'.repeat(64) } })), 502);
          assert.equal(await statusOf(agent.exec(req.sandboxId, { command: 'cat', stdin: { ...stdin, sizeBytes: 1 } })), 502);
          assert.equal(await statusOf(agent.exec(req.sandboxId, { command: 'cat', stdin: { url: 'ftp://x', sha256: stdin.sha256, sizeBytes: 1 } })), 400);
        } finally {
          server.close();
        }
      });

      await t.test('pause answers it paused with its kind; a second pause and a network update are 409; resume answers it running', async () => {
        const paused = await agent.pauseSandbox(req.sandboxId);
        assertSandbox(paused, req, 'paused');
        assert.ok(paused.pauseKind === 'freeze' || paused.pauseKind === 'snapshot');
        assert.equal(await statusOf(agent.exec(req.sandboxId, { command: 'true' })), 409, 'no exec while paused');
        assert.equal(await statusOf(agent.pauseSandbox(req.sandboxId)), 409);
        assert.equal(await statusOf(agent.updateNetwork(req.sandboxId, { allowInternetAccess: true, network: { allowOut: [], denyOut: [] } })), 409);
        const resumed = await agent.resumeSandbox(req.sandboxId);
        assertSandbox(resumed, req, 'running');
        assert.equal(resumed.pauseKind, undefined);
      });

      await t.test('a filesystem pause (memory false) answers kind filesystem; its resume needs the environment (400 without) and answers it running', async () => {
        const paused = await agent.pauseSandbox(req.sandboxId, { memory: false });
        assertSandbox(paused, req, 'paused');
        assert.equal(paused.pauseKind, 'filesystem');
        assert.equal(await statusOf(agent.pauseSandbox(req.sandboxId, { memory: false })), 409);
        assert.equal(await statusOf(agent.resumeSandbox(req.sandboxId)), 400);
        const resumed = await agent.resumeSandbox(req.sandboxId, { envVars: req.envVars, envdAccessToken: req.envdAccessToken });
        assertSandbox(resumed, req, 'running');
        assert.equal(resumed.pauseKind, undefined);
      });

      await t.test('a snapshot captures the writable layer under the id given, leaves the sandbox running, and a create starts from it', async () => {
        const layerId = `layer-${req.sandboxId}`;
        const layer = await agent.snapshotSandbox(req.sandboxId, { layerId });
        assert.equal(layer.layerId, layerId);
        assert.equal(layer.artifactId, req.artifact.artifactId);
        assert.equal(layer.sandboxId, req.sandboxId);
        assert.equal(layer.contents, 'filesystem');
        assert.match(layer.sha256, /^[0-9a-f]{64}$/);
        assert.ok(layer.sizeBytes > 0);
        assert.ok(!Number.isNaN(Date.parse(layer.createdAt)));
        assertSandbox(await agent.getSandbox(req.sandboxId), req, 'running');
        assert.ok((await agent.listLayers()).some((l) => l.layerId === layerId));
        assert.equal(await statusOf(agent.snapshotSandbox(req.sandboxId, { layerId })), 409, 'the id is taken');
        assert.equal(await statusOf(agent.snapshotSandbox(req.sandboxId, { layerId: '../x' })), 400);
        assert.equal(await statusOf(agent.snapshotSandbox('no-such-sandbox', { layerId: `${layerId}-2` })), 404);

        const ref = { layerId, sha256: layer.sha256, sizeBytes: layer.sizeBytes };
        const child = { ...req, sandboxId: `${req.sandboxId}-c`, layer: ref };
        try {
          assertSandbox(await agent.createSandbox(child), child, 'running');
          assert.equal(await statusOf(agent.createSandbox({ ...req, sandboxId: `${req.sandboxId}-d`, layer: { ...ref, layerId: 'no-such-layer' } })), 404);
          assert.equal(await statusOf(agent.createSandbox({ ...req, sandboxId: `${req.sandboxId}-d`, layer: { ...ref, sha256: 'f'.repeat(64) } })), 409, 'the layer here has another sha256');
        } finally {
          await agent.deleteSandbox(child.sandboxId).catch(() => { /* the create failed: nothing to delete */ });
        }

        // Its archive is what the master copies into the artifact store; a node that lacks the
        // layer downloads it (sha256-checked) for a create.
        const archive = await agent.layerArchive(layerId);
        assert.equal(archive.statusCode, 200);
        assert.equal(archive.headers[LAYER_SHA256_HEADER], layer.sha256);
        const bytes = Buffer.concat(await archive.toArray() as Buffer[]);
        assert.equal(bytes.length, layer.sizeBytes);
        assert.equal(createHash('sha256').update(bytes).digest('hex'), layer.sha256);
        const missing = await agent.layerArchive('no-such-layer');
        missing.resume();
        assert.equal(missing.statusCode, 404);
        assert.equal(await agent.deleteLayer(layerId), undefined);
        assert.ok(!(await agent.listLayers()).some((l) => l.layerId === layerId));
        assert.equal(await statusOf(agent.deleteLayer(layerId)), 404);

        const store = await serveBytes(bytes);
        const fetched = { ...req, sandboxId: `${req.sandboxId}-e`, layer: { ...ref, downloadUrl: store.url } };
        try {
          const wrong = { ...fetched, layer: { ...ref, layerId: `${layerId}-w`, sha256: 'e'.repeat(64), downloadUrl: store.url } };
          assert.equal(await statusOf(agent.createSandbox(wrong)), 502, 'a download with another sha256 is refused');
          assert.ok(!(await agent.listLayers()).some((l) => l.layerId === wrong.layer.layerId), 'and not kept');
          assertSandbox(await agent.createSandbox(fetched), fetched, 'running');
          assert.ok((await agent.listLayers()).some((l) => l.layerId === layerId && l.sha256 === layer.sha256), 'the downloaded layer is kept');
        } finally {
          await agent.deleteSandbox(fetched.sandboxId).catch(() => { /* the create failed: nothing to delete */ });
          await agent.deleteLayer(layerId).catch(() => { /* never downloaded */ });
          await store.close();
        }
      });

      await t.test('a paused sandbox is captured as it lies (its pause package), unless frozen (409)', async () => {
        const paused = await agent.pauseSandbox(req.sandboxId);
        try {
          const layerId = `layer-${req.sandboxId}-p`;
          if (paused.pauseKind === 'freeze') {
            assert.equal(await statusOf(agent.snapshotSandbox(req.sandboxId, { layerId })), 409);
          } else {
            assert.equal((await agent.snapshotSandbox(req.sandboxId, { layerId })).contents, 'memory');
            await agent.deleteLayer(layerId);
          }
        } finally {
          await agent.resumeSandbox(req.sandboxId);
        }
        await agent.pauseSandbox(req.sandboxId, { memory: false });
        try {
          const layer = await agent.snapshotSandbox(req.sandboxId, { layerId: `layer-${req.sandboxId}-f` });
          assert.equal(layer.contents, 'filesystem');
          assert.equal(layer.sandboxId, req.sandboxId);
          assert.equal((await agent.getSandbox(req.sandboxId)).state, 'paused', 'the capture does not wake it');
          await agent.deleteLayer(layer.layerId);
        } finally {
          await agent.resumeSandbox(req.sandboxId, { envVars: req.envVars, envdAccessToken: req.envdAccessToken });
        }
      });

      await t.test('delete answers 204 (no volume counts flipped); then the sandbox is 404 everywhere', async () => {
        assert.deepEqual(await agent.deleteSandbox(req.sandboxId), {});
        assert.equal(await statusOf(agent.getSandbox(req.sandboxId)), 404);
        assert.ok(!(await agent.listSandboxes()).some((x) => x.sandboxId === req.sandboxId));
        assert.equal(await statusOf(agent.deleteSandbox(req.sandboxId)), 404);
        assert.equal(await statusOf(agent.pauseSandbox(req.sandboxId)), 404);
        assert.equal(await statusOf(agent.resumeSandbox(req.sandboxId)), 404);
        assert.equal(await statusOf(agent.updateNetwork(req.sandboxId, { allowInternetAccess: true, network: { allowOut: [], denyOut: [] } })), 404);
      });
    } finally {
      await agent.deleteSandbox(req.sandboxId).catch(() => { /* already deleted by the suite, or never created */ });
      await s.close();
    }
  });
}

export interface NodeArtifactSubject {
  url: string;
  /** As NodeAgentSubject's. */
  served?: () => ServedRoute[];
  /** An artifact the subject can download: its id and what the master would send to ensure it. */
  artifact: { artifactId: string; ensure: EnsureArtifact };
  close(): Promise<void>;
}

/** The node agent's artifact routes as the master's template distribution uses them. */
export function nodeArtifactContract(name: string, make: () => Promise<NodeArtifactSubject>): void {
  test(`node agent artifact routes contract: ${name}`, async (t) => {
    const s = await make();
    const agent = new NodeAgentClient(s.url);
    const { artifactId, ensure } = s.artifact;
    try {
      await t.test('serves no route outside NODE_AGENT_ROUTES', { skip: !s.served && 'the real agent: routes.test.ts' }, () => {
        assert.deepEqual(routeGaps(NODE_AGENT_ROUTES, s.served!()).unlisted, []);
      });

      await t.test('ensure downloads the artifact once and answers where it is; list shows it', async () => {
        const a = await agent.ensureArtifact(artifactId, ensure);
        assert.equal(a.artifactId, artifactId);
        assert.equal(a.sha256.toLowerCase(), ensure.sha256.toLowerCase());
        assert.equal(a.sizeBytes, ensure.sizeBytes);
        assert.equal(typeof a.path, 'string');
        assert.deepEqual(await agent.ensureArtifact(artifactId, ensure), a, 'a second ensure answers the same');
        assert.ok((await agent.listArtifacts()).some((x) => x.artifactId === artifactId));
      });

      await t.test('a sha256 that is not 64 hex digits is 400; another sha256 for an id it holds is 409; a download that does not match is 502', async () => {
        assert.equal(await statusOf(agent.ensureArtifact(`${artifactId}-x`, { ...ensure, sha256: 'not-a-digest' })), 400);
        assert.equal(await statusOf(agent.ensureArtifact(artifactId, { ...ensure, sha256: '0'.repeat(64) })), 409);
        assert.equal(await statusOf(agent.ensureArtifact(`${artifactId}-other`, { ...ensure, sha256: '0'.repeat(64) })), 502);
        assert.ok(!(await agent.listArtifacts()).some((x) => x.artifactId === `${artifactId}-other`), 'nothing kept of a failed download');
      });

      await t.test('delete answers 204, again too; list no longer shows it', async () => {
        assert.equal(await agent.deleteArtifact(artifactId), undefined);
        assert.equal(await agent.deleteArtifact(artifactId), undefined);
        assert.ok(!(await agent.listArtifacts()).some((x) => x.artifactId === artifactId));
      });
    } finally {
      await s.close();
    }
  });
}

/** A loopback server answering every GET with `bytes` (the artifact store, as a node downloads from it). */
async function serveBytes(bytes: Buffer): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-length': bytes.length }).end(bytes));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/layer.tar`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
