/**
 * Fuzzes every HTTP route of a running `svc up` (API gateway, master, node agent, data-plane
 * proxy and its admin port, lifecycle replicas, template center, and envd through the proxy)
 * with hostile input from a seeded generator, while real sandboxes exist. Defects: no answer
 * within 10 s, a dropped connection, a 5xx other than 502/503/504, an error body that is not
 * `{code, message}`, a component that stops answering; afterwards nothing may be left behind.
 *
 * Replay a run: SVC_FUZZ_SEED=<seed printed at the start>; only some components:
 * SVC_FUZZ_ONLY=api,envd (the cases of a route do not depend on the others); one request at a
 * time: SVC_FUZZ_CONCURRENCY=1.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadConfig, parseListen } from '@svc/common';
import { loadOrCreateSecrets } from '../../packages/cli/src/secrets.ts';
import { lifecycleReplicaUrls } from '@svc/contracts/lifecycle';
import { ResourceNames } from '../../packages/node-agent/src/names.ts';
import { leftovers } from '@svc/node-agent/testing/fixtures';
import { Sandbox } from '@svc/sdk';
import { knownDefect, KNOWN_DEFECTS } from './fuzz/allow-list.ts';
import { CaseBuilder, type Ports } from './fuzz/cases.ts';
import { Rng, seedFromEnv } from './fuzz/random.ts';
import { describeDefect, Tally } from './fuzz/report.ts';
import { routeCatalog, type Known } from './fuzz/routes.ts';
import { send } from './fuzz/send.ts';
import type { Case, Component, RouteSpec } from './fuzz/spec.ts';
import { judge } from './fuzz/verdict.ts';
import { diagnoseFailures, sandboxProcessesAll, startPlatform, type RunningPlatform } from './harness.ts';

/**
 * Its own data directory, kept between runs (the base template is built once): what the fuzzer
 * leaves in the database (node rows it registered, labels) stays out of the other e2e tests.
 */
const DATA_DIR = '/tmp/svc-e2e-fuzz';
/** Ports and an address pool of its own: the fuzzer can run beside another harness `svc up`. */
const FUZZ_ENV = {
  SVC_API_LISTEN: '127.0.0.1:13100',
  SVC_MASTER_LISTEN: '127.0.0.1:18189',
  SVC_NODE_AGENT_LISTEN: '127.0.0.1:18188',
  SVC_PROXY_HTTP_PORT: '13102',
  SVC_PROXY_ADMIN_PORT: '18182',
  SVC_TEMPLATE_CENTER_LISTEN: '127.0.0.1:18190',
  SVC_LIFECYCLE_LISTEN: '127.0.0.1:18183',
  SVC_ADDRESS_POOL: '10.215.0.0/16',
  // Warm sandboxes would count as leftovers once every sandbox is killed; the pool has tests of its own.
  SVC_WARM_POOL_SIZE: '0',
  // The fuzzer sends thousands of bad keys from loopback; the per-address cut-off would then refuse its good key too.
  SVC_API_MAX_FAILED_KEYS_PER_MIN: '1000000',
};
const CONCURRENCY = Number(process.env.SVC_FUZZ_CONCURRENCY ?? 4);
const PROXY_DATA_CASES = 80;

const seed = seedFromEnv();
const only = process.env.SVC_FUZZ_ONLY ? new Set(process.env.SVC_FUZZ_ONLY.split(',').map((s) => s.trim())) : undefined;

let p: RunningPlatform;
let ports: Ports;
let known: Known;
diagnoseFailures(() => p);

before(async () => {
  console.log(`fuzz seed ${seed} (replay with SVC_FUZZ_SEED=${seed})`);
  const starting = Date.now();
  p = await startPlatform({ dataDir: DATA_DIR, env: FUZZ_ENV });
  console.log(`svc up ready in ${Date.now() - starting} ms`);
  const cfg = loadConfig({ env: p.env, overrides: { data_dir: p.dataDir } });
  ports = {
    api: parseListen(cfg.api.listen).port,
    master: parseListen(cfg.master.listen).port,
    nodeAgent: parseListen(cfg.node_agent.listen).port,
    proxyData: cfg.proxy.http_port,
    proxyAdmin: cfg.proxy.admin_port,
    lifecycle: lifecycleReplicaUrls(cfg.lifecycle).map((u) => Number(new URL(u).port)),
    templateCenter: parseListen(cfg.template_center.listen).port,
  };
  const secrets = loadOrCreateSecrets(p.dataDir);
  const conn = { apiUrl: p.apiUrl, apiKey: p.apiKey, sandboxUrl: p.sandboxUrl };
  const [running, priv, doomed] = await Promise.all([
    Sandbox.create('base', { ...conn, secure: true, timeoutMs: 600_000 }),
    // not secure: its envd answers without a token, so the proxy's traffic-token gate is what is fuzzed
    Sandbox.create('base', { ...conn, secure: false, network: { allowPublicTraffic: false }, timeoutMs: 600_000 }),
    Sandbox.create('base', { ...conn, timeoutMs: 600_000 }),
  ]);
  await doomed.kill();
  const detail = await api<{ envdAccessToken?: string }>('GET', `/sandboxes/${running.sandboxId}`);
  // The kept database also lists the nodes earlier runs' fuzzing registered: pick this platform's own.
  const nodes = await api<{ nodeId: string; address: string }[]>('GET', '/nodes');
  const node = nodes.find((n) => n.address === `http://127.0.0.1:${ports.nodeAgent}`);
  assert.ok(node, `the platform's node agent is registered (${JSON.stringify(nodes)})`);
  assert.ok(detail.envdAccessToken, 'a secure sandbox has an envd access token');
  assert.ok(priv.trafficAccessToken, 'a sandbox without public traffic has a traffic token');
  console.log(`sandboxes ready in ${Date.now() - starting} ms`);
  known = {
    apiKey: p.apiKey, callbackToken: secrets.template_callback_token, adminToken: secrets.proxy_admin_token, nodeToken: secrets.node_agent_token, clusterToken: secrets.cluster_token, domain: p.domain,
    nodeId: node.nodeId, running: running.sandboxId, envdToken: detail.envdAccessToken, private: priv.sandboxId,
    trafficToken: priv.trafficAccessToken, killed: doomed.sandboxId,
  };
});

after(async () => {
  if (!p) return;
  const stopping = Date.now();
  await p.stop();
  console.log(`svc up stopped in ${Date.now() - stopping} ms`);
  assert.deepEqual(sandboxProcessesAll().filter((l) => l.includes(p.dataDir)), [], 'svc up left sandbox processes behind');
  assert.deepEqual(await hostLeftovers(), [], 'svc up left host resources behind');
});

/** Network namespaces, veths, mounts, runsc state, nft sets, cgroups and sandbox directories of this platform's node agent. */
async function hostLeftovers(): Promise<[string, string[]][]> {
  const stateDir = join(p.dataDir, 'node');
  return Object.entries(await leftovers(stateDir, new ResourceNames(stateDir).tag)).filter(([, v]) => v.length > 0);
}

test(`fuzz every HTTP route (seed ${seed})`, { timeout: 300_000 }, async (t) => {
  const started = Date.now();
  const builder = new CaseBuilder(known, ports);
  const root = new Rng(seed);
  const routes = routeCatalog(known).filter((r) => !only || only.has(r.component));
  const casesOf = (list: RouteSpec[]) => list.flatMap((r) => builder.forRoute(r, root.fork(`${r.component} ${r.method} ${r.path}`)));
  const of = (...cs: Component[]) => routes.filter((r) => cs.includes(r.component));
  const schedulingRoutes = new Set(['/internal/v1/nodes/register', '/internal/v1/nodes/:id/heartbeat']);
  const wanted = (c: Component) => !only || only.has(c);

  // Order matters: envd while the sandboxes surely run; public and master routes (which may
  // pause or kill them) after; node registration (which changes scheduling) last.
  const phases: [string, Case[]][] = [
    ['data plane and envd', [
      ...(wanted('proxy-data') ? builder.proxyDataCases(root.fork('proxy-data'), PROXY_DATA_CASES) : []),
      ...casesOf(of('envd')),
    ]],
    ['internal components', [...casesOf(of('node-agent', 'lifecycle', 'template-center', 'proxy-admin')), ...builder.rawCases().filter((c) => wanted(c.component))]],
    ['API gateway', casesOf(of('api'))],
    ['master', casesOf(of('master').filter((r) => !schedulingRoutes.has(r.path)))],
    ['node registration', casesOf(of('master').filter((r) => schedulingRoutes.has(r.path)))],
  ];

  const tally = new Tally();
  const defects: string[] = [];
  const knownSeen = new Map<string, number>();
  for (const [name, cases] of phases) {
    const phaseStart = Date.now();
    await runPool(cases, CONCURRENCY, async (c) => {
      const o = await send(c);
      let unknownCount = 0;
      let knownCount = 0;
      for (const d of judge(c, o)) {
        const k = knownDefect(c, o, d);
        if (k) { knownCount++; knownSeen.set(k.reason, (knownSeen.get(k.reason) ?? 0) + 1); continue; }
        unknownCount++;
        defects.push(describeDefect(c, o, d));
      }
      tally.record(c, o, unknownCount, knownCount);
    });
    t.diagnostic(`phase "${name}": ${cases.length} requests in ${Date.now() - phaseStart} ms`);
    await assertAllAnswer(`after phase "${name}"`);
    if (name === 'data plane and envd') defects.push(...await deadSandboxes());
  }

  const cleanupStart = Date.now();
  await killEverySandbox();
  const listed = await api<unknown[]>('GET', '/v2/sandboxes?state=running,paused');
  await removeFuzzTemplates();

  t.diagnostic(`cleanup in ${Date.now() - cleanupStart} ms`);
  console.log(`fuzz summary (seed ${seed}, ${tally.total} requests, ${Math.round((Date.now() - started) / 1000)} s):`);
  for (const line of tally.lines()) console.log(`  ${line}`);
  for (const k of KNOWN_DEFECTS) console.log(`  known defect ${knownSeen.has(k.reason) ? `seen ${knownSeen.get(k.reason)}×` : 'NOT SEEN (stale entry?)'}: ${k.reason}`);
  for (const d of defects) console.log(d);

  assert.deepEqual(listed, [], 'no sandbox is left after killing them all');
  // Cleanup of a killed sandbox (cgroups, directories) may finish just after the answer.
  await waitFor('the killed sandboxes\' host resources to go', async () => (await hostLeftovers()).length === 0).catch(() => { /* the assertion right below says what is left */ });
  assert.deepEqual(await hostLeftovers(), [], 'killed sandboxes left host resources behind');
  assert.equal(defects.length, 0, `${defects.length} defects (seed ${seed}); see the output above`);
});

async function runPool(cases: Case[], concurrency: number, each: (c: Case) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < cases.length) await each(cases[next++]);
  }));
}

/** Every component still answers its health route: none crashed or wedged. */
async function assertAllAnswer(when: string): Promise<void> {
  const checks: [string, number, string][] = [
    ['api', ports.api, '/health'], ['master', ports.master, '/notify/health'], ['node-agent', ports.nodeAgent, '/health'],
    ['proxy-admin', ports.proxyAdmin, '/admin/healthz'], ['template-center', ports.templateCenter, '/health'],
    ...ports.lifecycle.map((port): [string, number, string] => ['lifecycle', port, '/health']),
  ];
  for (const [name, port, path] of checks) {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(10_000) }).catch((err: Error) => err);
    assert.ok(!(res instanceof Error) && res.ok, `${name} does not answer ${path} ${when}: ${res instanceof Error ? res.message : res.status}\n`
      + `svc up stderr (last 3000 characters):\n${p.stderrText().slice(-3000)}`);
  }
}

/** The two live sandboxes must survive the data-plane phase: a request that kills a sandbox is a defect. */
async function deadSandboxes(): Promise<string[]> {
  const out: string[] = [];
  for (const [id, headers] of [[known.running, { 'x-access-token': known.envdToken }], [known.private, { 'e2b-traffic-access-token': known.trafficToken }]] as const) {
    const res = await fetch(`${p.sandboxUrl}/health`, { headers: { 'e2b-sandbox-id': id, ...headers }, signal: AbortSignal.timeout(10_000) }).catch((err: Error) => err);
    const status = res instanceof Error ? res.message : res.status;
    if (status !== 204) out.push(`[envd] sandbox ${id} no longer answers GET /health after the data-plane phase (${status}): a request killed it or its envd`);
  }
  return out;
}

async function api<T>(method: string, path: string): Promise<T> {
  const res = await fetch(p.apiUrl + path, { method, headers: { 'x-api-key': p.apiKey }, signal: AbortSignal.timeout(60_000) });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (res.status === 204 ? undefined : await res.json()) as T;
}

/** Kills every sandbox of this platform (the fuzzer's own creates included), retrying while one is locked. */
async function killEverySandbox(): Promise<void> {
  for (let round = 0; round < 30; round++) {
    const list = await api<{ sandboxID: string }[]>('GET', '/v2/sandboxes?state=running,paused');
    if (list.length === 0) return;
    for (const s of list) {
      const res = await fetch(`${p.apiUrl}/sandboxes/${s.sandboxID}`, { method: 'DELETE', headers: { 'x-api-key': p.apiKey }, signal: AbortSignal.timeout(60_000) });
      await res.body?.cancel();
      if (res.status !== 204 && res.status !== 404 && res.status !== 503) throw new Error(`killing ${s.sandboxID}: ${res.status}`);
    }
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/** Templates the fuzzer created (failed builds: no artifact to wait for), so the kept data directory does not grow. */
async function removeFuzzTemplates(): Promise<void> {
  const { templates } = await api<{ templates: { template_id: string; alias?: string | null }[] }>('GET', '/svc/template');
  for (const tpl of templates) {
    if (tpl.alias === 'base') continue;
    const res = await fetch(`${p.apiUrl}/svc/template/${encodeURIComponent(tpl.template_id)}`, { method: 'DELETE', headers: { 'x-api-key': p.apiKey }, signal: AbortSignal.timeout(30_000) });
    await res.body?.cancel();
    if (res.status !== 204 && res.status !== 404) throw new Error(`removing template ${tpl.template_id}: ${res.status}`);
  }
}

async function waitFor(what: string, ok: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
