/**
 * E2B's `network.egressProxy` through the whole platform (docs/egress.md "Bring your own proxy"):
 * real sandboxes made by the official e2b SDK, a real SOCKS5 proxy (Debian's dante) in "the
 * internet" namespace of the test's own, the upstream behind it telling where each request came
 * from. Traffic goes through the proxy, with its credentials; stops (never direct) when the
 * proxy is down or speaks something else; the layer-3 lists decide first; the password is
 * never shown or logged.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Sandbox } from 'e2b';
import { readJsonLines, startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';
import { INTERNET_ADDRESS, startInternet, type Internet } from './internet/internet.ts';
import { SOCKS_PASSWORD, SOCKS_USER, SQUID_PASSWORD, SQUID_USER, startDante, startSquid } from './internet/proxies.ts';

const NAMES = ['api.example.test'];
const HOST_SIDE = '10.203.0.1';
let p: RunningPlatform;
let inet: Internet;
let dante: Awaited<ReturnType<typeof startDante>>;
let squid: Awaited<ReturnType<typeof startSquid>> | undefined;
diagnoseFailures(() => p);
before(async () => {
  inet = await startInternet(NAMES);
  dante = await startDante();
  p = await startPlatform({ dataDir: DATA_DIR, env: platformEnv() });
  useE2bEnv(p);
});

const DATA_DIR = '/tmp/svc-e2e-egress-proxy';
const platformEnv = (extra: Record<string, string> = {}) => ({
  SVC_EGRESS_RESOLVE: NAMES.map((n) => `${n}=${INTERNET_ADDRESS}`).join(','), SVC_EGRESS_UPSTREAM_CA_FILE: inet.caFile, ...extra,
});
after(async () => {
  await p?.stop();
  await dante?.close();
  await squid?.close();
  await inet?.close();
});

const socks = () => ({ address: dante.address, username: SOCKS_USER, password: SOCKS_PASSWORD });
const lastRequest = (path: string) => inet.requests().filter((r) => r.path === path).at(-1);
const audit = () => readJsonLines(`${p.dataDir}/log/svc-egress/access.jsonl`);

async function curl(sbx: Sandbox, url: string): Promise<{ status: number; out: string }> {
  const resolve = NAMES.map((n) => `--resolve ${n}:443:${INTERNET_ADDRESS}`).join(' ');
  const r = await sbx.commands.run(`curl -s -m 15 ${resolve} -o /dev/null -w '%{http_code}' '${url}'`, { timeoutMs: 30_000 }).catch((e: { result?: { stdout: string; exitCode: number } }) => e.result ?? { stdout: '', exitCode: -1 });
  return { status: Number(r.stdout.trim() || 0), out: r.stdout };
}

test('egressProxy: plain TCP and rule-matched HTTPS go through the SOCKS5 proxy with its credentials; reads never show the password', async () => {
  const sbx = await Sandbox.create({
    network: { egressProxy: socks(), allowOut: ['api.example.test'], rules: { 'api.example.test': [{ transform: { headers: { 'X-Api-Key': 'through-socks' } } }] } },
  });
  try {
    const info = await sbx.getInfo();
    assert.deepEqual(info.network?.egressProxy, { address: dante.address, username: SOCKS_USER });
    // A port no rule takes: the tunnel listener, on through dante.
    assert.equal((await curl(sbx, `http://${INTERNET_ADDRESS}:8081/tunneled`)).status, 200);
    assert.equal(lastRequest('/tunneled')?.remote, dante.address.split(':')[0], 'the upstream saw the SOCKS proxy, not the host');
    // HTTPS for a rule: the egress proxy's own upstream connection goes through dante too.
    assert.equal((await curl(sbx, 'https://api.example.test/v1/through')).status, 200);
    const r = lastRequest('/v1/through');
    assert.equal(r?.remote, dante.address.split(':')[0]);
    assert.equal(r?.headers?.['x-api-key'], 'through-socks');
    const tcp = audit().filter((a) => a.type === 'tcp' && a.sandbox_id === sbx.sandboxId);
    assert.ok(tcp.some((a) => a.status === 'closed' && a.dst_port === 8081 && a.via === dante.address), JSON.stringify(tcp));
    const raw = await fetch(`${p.apiUrl}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-Key': p.apiKey } }).then((x) => x.text());
    assert.ok(!raw.includes(SOCKS_PASSWORD), 'GET /sandboxes/{id} shows the password');
  } finally {
    await sbx.kill();
  }
  assert.ok(!readFileSync(p.logFile, 'utf8').includes(SOCKS_PASSWORD), 'the platform log holds the password');
  assert.ok(!readFileSync(`${p.dataDir}/log/svc-egress/access.jsonl`, 'utf8').includes(SOCKS_PASSWORD), 'the audit log holds the password');
});

test('egressProxy fails closed: proxy down, wrong password, not SOCKS5; denyOut decides before the proxy', async () => {
  const sbx = await Sandbox.create({ network: { egressProxy: socks() } });
  try {
    await dante.stop();
    const before = inet.requests().length;
    assert.equal((await curl(sbx, `http://${INTERNET_ADDRESS}:8081/while-down`)).status, 0, 'a connection with the proxy down must fail');
    assert.equal(inet.requests().length, before, 'nothing went direct');
    await dante.start();
    assert.equal((await curl(sbx, `http://${INTERNET_ADDRESS}:8081/back-up`)).status, 200);
    // A wrong password: dante refuses, nothing goes direct.
    await sbx.updateNetwork({ egressProxy: { ...socks(), password: 'wrong' } });
    assert.equal((await curl(sbx, `http://${INTERNET_ADDRESS}:8081/wrong-password`)).status, 0);
    assert.equal(lastRequest('/wrong-password'), undefined);
    // Not a SOCKS5 server (the upstream's own HTTP port).
    await sbx.updateNetwork({ egressProxy: { address: `${INTERNET_ADDRESS}:80` } });
    assert.equal((await curl(sbx, `http://${INTERNET_ADDRESS}:8081/not-socks`)).status, 0);
    assert.equal(lastRequest('/not-socks'), undefined);
    // denyOut first: the proxy never sees a denied connection.
    await sbx.updateNetwork({ egressProxy: socks(), denyOut: [`${INTERNET_ADDRESS}/32`] });
    assert.equal((await curl(sbx, `http://${INTERNET_ADDRESS}:8081/denied`)).status, 0);
    assert.equal(lastRequest('/denied'), undefined);
    // An update without egressProxy stops tunneling (E2B: the update replaces everything).
    await sbx.updateNetwork({});
    assert.equal((await curl(sbx, `http://${INTERNET_ADDRESS}:8081/direct-again`)).status, 200);
    assert.equal(lastRequest('/direct-again')?.remote, HOST_SIDE);
    assert.equal((await sbx.getInfo()).network?.egressProxy, undefined);
  } finally {
    await sbx.kill();
  }
  const failed = audit().filter((a) => a.type === 'tcp' && a.sandbox_id === sbx.sandboxId && a.status === 'failed');
  assert.ok(failed.length >= 3, JSON.stringify(failed));
});

test('egressProxy addresses that are not host:port, or that point at the platform, the sandbox pool, loopback or link-local, are 400', async () => {
  const api = (body: unknown) => fetch(`${p.apiUrl}/sandboxes`, { method: 'POST', headers: { 'X-API-Key': p.apiKey, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const apiPort = new URL(p.apiUrl).port;
  for (const egressProxy of [
    { address: 'no-port' }, { address: '10.203.0.5' }, { address: '[::1]:1080' }, { address: 'a b:1080' }, { address: 'host:99999' },
    { address: `127.0.0.1:${apiPort}` }, { address: '10.210.0.9:1080' }, { address: '127.0.0.1:1080' }, { address: 'localhost:1080' }, { address: '169.254.169.254:1080' }, { address: 'proxy:1080', password: 'no-user' }, { address: 'x:1', username: 'u'.repeat(256) }, 'not-an-object',
  ]) {
    const r = await api({ templateID: 'base', network: { egressProxy } });
    const text = await r.text();
    assert.equal(r.status, 400, `${JSON.stringify(egressProxy)} → ${r.status} ${text}`);
    assert.match((JSON.parse(text) as { message: string }).message, /egressProxy/);
  }
});

test("egress.upstream_proxy: the operator's own HTTP CONNECT proxy (squid, with credentials) carries every sandbox's TCP, and nothing goes direct when it stops", async () => {
  squid = await startSquid();
  await p.stop();
  p = await startPlatform({ dataDir: DATA_DIR, env: platformEnv({ SVC_EGRESS_UPSTREAM_PROXY: `http://${SQUID_USER}:${SQUID_PASSWORD}@${squid.address}` }) });
  useE2bEnv(p);
  const squidIp = squid.address.split(':')[0];
  // No network option at all: the operator's proxy still carries it.
  const plain = await Sandbox.create();
  // A sandbox's own egressProxy wins over the operator's.
  const own = await Sandbox.create({ network: { egressProxy: socks() } });
  try {
    assert.equal((await curl(plain, `http://${INTERNET_ADDRESS}:8081/via-squid`)).status, 200);
    assert.equal(lastRequest('/via-squid')?.remote, squidIp);
    assert.equal((await curl(own, `http://${INTERNET_ADDRESS}:8081/own-socks`)).status, 200);
    assert.equal(lastRequest('/own-socks')?.remote, dante.address.split(':')[0]);
    await squid.stop();
    assert.equal((await curl(plain, `http://${INTERNET_ADDRESS}:8081/squid-down`)).status, 0);
    assert.equal(lastRequest('/squid-down'), undefined, 'nothing went direct');
  } finally {
    await plain.kill();
    await own.kill();
  }
  assert.ok(!readFileSync(p.logFile, 'utf8').includes(SQUID_PASSWORD), 'the platform log holds the operator proxy\'s password');
});
