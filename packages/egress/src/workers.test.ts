import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { silentLogger, type WorkerEntry } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';

// The egress proxy with its data path in two worker processes, on loopback: the sandbox is
// 127.0.0.1, the upstream listens there too and is reached by name through `resolve`. Every
// request goes on a new connection, so that the kernel spreads them over both workers; the
// workers' stats (connections accepted) show that both served some of each batch.

const TOKEN = 'egress-workers-admin-token';
const entry: WorkerEntry = { exec: fileURLToPath(new URL('./worker-main.ts', import.meta.url)), args: [], execArgv: ['--import', 'tsx'] };
let dir: string;
let upstream: http.Server;
let upstreamPort: number;
let proxy: EgressProxy;

const policy = (sandboxId: string, host: string): SandboxEgressPolicy => ({
  sandboxId, address: '127.0.0.1',
  rules: [{ name: host, match: { scheme: 'http', port: upstreamPort, host }, action: { allow: true } }],
});

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-workers-'));
  upstream = http.createServer((_req, res) => res.end('ok'));
  upstreamPort = await new Promise<number>((resolve) => upstream.listen(0, '127.0.0.1', () => resolve((upstream.address() as AddressInfo).port)));
  proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, tunnelPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: TOKEN,
    caDir: join(dir, 'ca'), auditLogPath: join(dir, 'access.jsonl'),
    resolve: Object.fromEntries(['boot.test', 'allowed.test', 'later.test', 'audit.test'].map((h) => [h, '127.0.0.1'])),
    // The master's list, which reaches the workers as the bootstrap's result.
    policySource: async () => [policy('sbx-boot', 'boot.test')],
    workers: { count: 2, entry },
    logger: silentLogger(),
  });
});

after(async () => {
  await proxy?.close();
  upstream?.closeAllConnections();
  upstream?.close();
  await rm(dir, { recursive: true, force: true });
});

/** One request from the sandbox on a new connection; the status, or the error's code. Over HTTPS, the proxy's leaf must chain to its CA. */
function send(host: string, path = '/', scheme: 'http' | 'https' = 'http'): Promise<number | string> {
  return new Promise((resolve) => {
    const common = { host: '127.0.0.1', path, headers: { host: `${host}:${upstreamPort}` }, agent: false as const };
    const req = scheme === 'https'
      ? https.request({ ...common, port: proxy.httpsPort, servername: host, ca: proxy.caPem }, answered)
      : http.request({ ...common, port: proxy.httpPort }, answered);
    function answered(res: http.IncomingMessage) {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    }
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end();
  });
}

async function admin(method: string, path: string, body?: unknown): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${proxy.adminPort}${path}`, {
    method,
    headers: { [EGRESS_ADMIN_TOKEN_HEADER]: TOKEN, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  await res.arrayBuffer();
  return res.status;
}

const connectionsByPid = async () => new Map((await proxy.workerStats!()).map((s) => [s.pid, s.connections]));

/**
 * Batches of concurrent requests, each on a new connection, until every worker has served at
 * least one since the call; every answer must be `status`. Returns how many were sent.
 */
async function onEveryWorker(host: string, status: number, what: string, path: (i: number) => string = () => '/', scheme: 'http' | 'https' = 'http'): Promise<number> {
  const before = await connectionsByPid();
  let sent = 0;
  for (let round = 0; round < 40; round++) {
    const answers = await Promise.all(Array.from({ length: 12 }, () => send(host, path(sent++), scheme)));
    assert.deepEqual(answers, answers.map(() => status), `${what}: every answer is ${status}`);
    const now = await proxy.workerStats!();
    if (now.length === 2 && now.every((s) => s.connections > (before.get(s.pid) ?? 0))) return sent;
  }
  throw new Error(`${what}: after ${sent} requests one worker had still served none`);
}

async function eventually<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, what: string, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

test('the bootstrap\'s policies reach both workers before the proxy counts as ready', async () => {
  await eventually(() => proxy.ready(), 'the proxy to be ready');
  assert.equal(proxy.pids!().length, 2);
  for (const s of await proxy.workerStats!()) assert.deepEqual({ ready: s.ready, policies: s.policies }, { ready: true, policies: 1 });
  await onEveryWorker('boot.test', 200, 'the master\'s policy');
  // Every worker's HTTPS listener signs its leaves with the primary's CA (and finds no HTTPS rule here).
  await onEveryWorker('boot.test', 403, 'HTTPS through the TLS listener', () => '/', 'https');
});

test('a PUT through the admin API is in force on every worker when it answers; after a DELETE every worker refuses the sandbox', async () => {
  assert.equal(await admin('PUT', '/admin/policies/sbx-a', policy('sbx-a', 'allowed.test')), 200);
  // sbx-a took the sandbox address from sbx-boot: its rules decide from the first request on.
  await onEveryWorker('allowed.test', 200, 'right after the PUT');
  await onEveryWorker('boot.test', 403, 'the displaced policy');

  assert.equal(await admin('PUT', '/admin/policies/sbx-a', policy('sbx-a', 'later.test')), 200);
  await onEveryWorker('later.test', 200, 'right after the second PUT');
  await onEveryWorker('allowed.test', 403, 'the rule the second PUT replaced');

  assert.equal(await admin('DELETE', '/admin/policies/sbx-a'), 204);
  await onEveryWorker('later.test', 403, 'right after the DELETE (unknown sandbox)');
  for (const s of await proxy.workerStats!()) assert.equal(s.policies, 0);
});

test('the audit lines of both workers land whole in the one file, none lost or doubled', async () => {
  assert.equal(await admin('PUT', '/admin/policies/sbx-audit', policy('sbx-audit', 'audit.test')), 200);
  const sent = await onEveryWorker('audit.test', 200, 'audited requests', (i) => `/audit/${i}`);
  const paths = await eventually(async () => {
    const text = await readFile(join(dir, 'access.jsonl'), 'utf8');
    assert.ok(text.endsWith('\n'));
    // Every line parses: none was torn or interleaved with another.
    const lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { host?: string; path?: string });
    const mine = lines.filter((l) => l.host === 'audit.test').map((l) => l.path ?? '');
    return mine.length >= sent ? mine : undefined;
  }, `${sent} audit lines`);
  assert.equal(paths.length, sent, 'no line written twice');
  assert.deepEqual(new Set(paths), new Set(Array.from({ length: sent }, (_, i) => `/audit/${i}`)));
});

test('a worker killed during a loop of requests: no connection refused, and its replacement serves the current policies', async () => {
  assert.equal(await admin('PUT', '/admin/policies/sbx-kill', policy('sbx-kill', 'allowed.test')), 200);
  const [victim] = proxy.pids!();
  const outcomes: Array<number | string> = [];
  let stop = false;
  const loops = Array.from({ length: 4 }, async () => {
    while (!stop) outcomes.push(await send('allowed.test'));
  });
  await new Promise((r) => setTimeout(r, 200));
  process.kill(victim!, 'SIGKILL');
  // A change while the worker is dead: its replacement must start with it.
  assert.equal(await admin('PUT', '/admin/policies/sbx-kill', policy('sbx-kill', 'later.test')), 200);
  await eventually(() => proxy.pids!().length === 2 && !proxy.pids!().includes(victim!), 'the replacement worker', 20_000);
  await new Promise((r) => setTimeout(r, 200));
  stop = true;
  await Promise.all(loops);

  assert.ok(outcomes.length > 20, `the loop kept running (${outcomes.length} requests)`);
  assert.ok(!outcomes.includes('ECONNREFUSED'), 'no connection was refused');
  // Only requests the killed worker held when it died can fail (reset), at most one per loop.
  const failed = outcomes.filter((o) => typeof o === 'string');
  assert.ok(failed.length <= 4, `failed: ${failed.join(', ')}`);
  assert.ok(outcomes.every((o) => typeof o === 'string' || o === 200 || o === 403), 'answers are the old policy\'s or the new one\'s');
  const stats = await proxy.workerStats!();
  assert.deepEqual(stats.map((s) => s.policies), [1, 1]);
  await onEveryWorker('later.test', 200, 'the replacement and the survivor, by the policy PUT while the worker was dead');
  // The log says where it may miss records: the killed worker's open connections and last batch.
  const gap = await eventually(async () => {
    const lines = (await readFile(join(dir, 'access.jsonl'), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    return lines.find((l) => l.type === 'audit_gap');
  }, 'the audit_gap record');
  assert.equal(gap.reason, 'worker_exited');
  assert.equal(gap.pid, victim);
  assert.equal(gap.exit, 'SIGKILL');
  assert.match(String(gap.ts), /^\d{4}-\d\d-\d\dT/);
});

test('the primary\'s /metrics sums svc_egress_requests_total over the workers', async () => {
  const scrape = async () => {
    const res = await fetch(`http://127.0.0.1:${proxy.adminPort}/metrics`, { headers: { [EGRESS_ADMIN_TOKEN_HEADER]: TOKEN } });
    assert.equal(res.status, 200);
    const body = await res.text();
    return Number(/^svc_egress_requests_total\{decision="allow"\} (\S+)$/m.exec(body)?.[1] ?? NaN);
  };
  const before = await scrape();
  const sent = await onEveryWorker('later.test', 200, 'counted requests');
  // Counted as each answer closes: the last may still be under way.
  const after = await eventually(async () => { const v = await scrape(); return v - before >= sent ? v : undefined; }, 'the counts');
  assert.equal(after - before, sent);
});
