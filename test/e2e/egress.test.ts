/**
 * The egress proxy through the whole platform: real sandboxes call "the internet" (upstream
 * servers in a namespace of the test's own) with curl and Python; rules of the form of docs/egress.md "Rules" through
 * our SDK and CLI, E2B's network options through the official SDK; the audit log and every read
 * checked for the injected secrets.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { ALL_TRAFFIC, Sandbox as E2bSandbox, Secret as E2bSecret } from 'e2b';
import { createPublicKey, verify as verifySignature, type JsonWebKey } from 'node:crypto';
import { InvalidArgumentError, Sandbox, Team, type EgressRule } from '@svc/sdk';
import { SVC_BIN, readJsonLines, startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';
import { INTERNET_ADDRESS, OTHER_ADDRESS, startInternet, type Internet } from './internet/internet.ts';

const NAMES = ['api.example.test', 'open.example.test', 'example.test', 'deep.sub.example.test'];
const SECRET = 'sk-e2e-0123456789-never-in-the-sandbox';
const E2B_SECRET = 'e2b-transform-secret-abcdef';

let p: RunningPlatform;
let inet: Internet;
diagnoseFailures(() => p);
before(async () => {
  inet = await startInternet(NAMES);
  p = await startPlatform({
    dataDir: '/tmp/svc-e2e-egress',
    env: {
      SVC_EGRESS_RESOLVE: NAMES.map((n) => `${n}=${INTERNET_ADDRESS}`).join(','),
      SVC_EGRESS_UPSTREAM_CA_FILE: inet.caFile,
    },
  });
  useE2bEnv(p);
});
after(async () => {
  await p?.stop();
  await inet?.close();
});

const conn = () => ({ apiUrl: p.apiUrl, apiKey: p.apiKey, sandboxUrl: p.sandboxUrl });
const auditPath = () => `${p.dataDir}/log/svc-egress/access.jsonl`;
const audit = () => readJsonLines(auditPath());

/** curl in the sandbox; the names resolve to any address (the proxy decides where it goes). */
async function curl(sbx: Sandbox, url: string, extra = ''): Promise<{ status: number; body: string }> {
  const resolve = NAMES.map((n) => `--resolve ${n}:443:${INTERNET_ADDRESS} --resolve ${n}:80:${INTERNET_ADDRESS}`).join(' ');
  const r = await sbx.commands.run(`curl -s -m 20 ${resolve} ${extra} -o /tmp/body -w '%{http_code}' '${url}'; echo; cat /tmp/body 2>/dev/null`, { timeoutMs: 30_000 }).catch((e) => e.result ?? e);
  const [code, ...rest] = String(r.stdout ?? '').split('\n');
  return { status: Number(code), body: rest.join('\n') };
}

const RULES: EgressRule[] = [
  {
    name: 'models-read', match: { host: 'api.example.test', scheme: 'https', method: ['GET'], path: '/v1/*' },
    action: { allow: true, inject: [{ header: 'Authorization', format: 'Bearer ${SECRET}', secret: SECRET }] },
  },
  { name: 'open-exception', match: { host: 'open.example.test' }, action: { allow: true } },
  { name: 'ip-literal', match: { host: INTERNET_ADDRESS, scheme: 'https' }, action: { allow: true } },
  { name: 'example-subdomains-denied', match: { host: '*.example.test' }, action: { allow: false } },
];

test('rules of docs/egress.md through our SDK: path, method, first match, an exception before a broad deny, wildcard against the apex, inject unseen by the sandbox', async () => {
  const sbx = await Sandbox.create('base', { ...conn(), network: { rules: RULES } });
  try {
    const before = inet.requests().length;
    const ok = await curl(sbx, 'https://api.example.test/v1/models');
    assert.equal(ok.status, 200, ok.body);
    assert.equal(JSON.parse(ok.body).authorized, true);
    const seen = inet.requests().slice(before).find((r) => r.path === '/v1/models')!;
    assert.equal(seen.headers!.authorization, `Bearer ${SECRET}`, 'the upstream receives the injected header');

    // A header of the inject's name that the sandbox sends is replaced, never passed on.
    await curl(sbx, 'https://api.example.test/v1/spoof', "-H 'Authorization: Bearer from-the-sandbox'");
    assert.equal(inet.requests().find((r) => r.path === '/v1/spoof')!.headers!.authorization, `Bearer ${SECRET}`);

    const denied = async (url: string, extra = '') => {
      const n = inet.connections();
      const r = await curl(sbx, url, extra);
      assert.equal(r.status, 403, `${url}: ${r.body}`);
      assert.equal(inet.connections(), n, `${url}: a denied request never reaches the upstream`);
      return JSON.parse(r.body) as { code: number; message: string };
    };
    assert.match((await denied('https://api.example.test/v1/models', '-X POST')).message, /example-subdomains-denied/, 'method filter, then the broad deny');
    assert.match((await denied('https://api.example.test/v2/other')).message, /example-subdomains-denied/, 'path prefix');
    assert.match((await denied('http://api.example.test/v1/models')).message, /example-subdomains-denied/, 'the allow rule is https only');
    assert.match((await denied('https://deep.sub.example.test/')).message, /example-subdomains-denied/, '*. matches any depth');
    assert.match((await denied('https://example.test/')).message, /default deny|no rule/, '*. does not match the apex: nothing matches');

    const open = await curl(sbx, 'https://open.example.test/anything');
    assert.equal(open.status, 200, 'an allow listed before the broad deny is an exception to it');

    // A certificate for an IP: no SNI, the proxy finds the original destination.
    const byIp = await curl(sbx, `https://${INTERNET_ADDRESS}/by-ip`);
    assert.equal(byIp.status, 200, byIp.body);

    // Python trusts the proxy through the environment the template sets.
    await sbx.commands.run(`echo '${INTERNET_ADDRESS} open.example.test' >> /etc/hosts`, { user: 'root' });
    const py = await sbx.commands.run(`python3 -c "
import urllib.request, urllib.error
try:
    print(urllib.request.urlopen('https://open.example.test/py', timeout=20).status)
except urllib.error.HTTPError as e:
    print(e.code)
"`);
    assert.equal(py.stdout.trim(), '200', py.stderr);

    // The secret is nowhere in the sandbox: not in its environment, its files or what it received.
    const grep = await sbx.commands.run(`(env; cat /tmp/body) | grep -c '${SECRET}' || true`);
    assert.equal(grep.stdout.trim(), '0');
    assert.ok(!ok.body.includes(SECRET));

    // Reads redact it: the sandbox's info, the egress admin API; logs and the audit never hold it.
    const info = await (await fetch(`${p.apiUrl}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-Key': p.apiKey } })).text();
    assert.ok(!info.includes(SECRET), 'GET /sandboxes/{id} shows no secret');
    assert.ok(info.includes('[redacted]'));
    const records = audit();
    const text = readFileSync(auditPath(), 'utf8');
    assert.ok(!text.includes(SECRET), 'the audit log holds no secret');
    assert.ok(!readFileSync(p.logFile, 'utf8').includes(SECRET), 'svc.log holds no secret');
    const req = records.find((r) => r.path === '/v1/models' && r.status === 200)!;
    for (const f of ['ts', 'sandbox_ip', 'dst_ip', 'dst_port', 'scheme', 'host', 'method', 'path', 'status', 'bytes_in', 'bytes_out', 'latency_ms', 'tls_version', 'cipher', 'upstream_status', 'upstream_addr']) {
      assert.ok(f in req, `the request record has ${f}`);
    }
    assert.equal(req.rule, 'models-read');
    assert.equal(req.upstream_addr, `${INTERNET_ADDRESS}:443`);
    assert.ok(records.some((r) => r.type === 'security_event' && r.reason === 'inject_fired' && r.rule === 'models-read'));
    assert.ok(records.some((r) => r.type === 'security_event' && r.reason === 'default_deny' && r.host === 'example.test'));
  } finally {
    await sbx.kill();
  }
});

test('bad rules: a deny rule that injects, a port without a scheme, a CIDR host, two schemes on one port are refused (SDK locally, the API with 400)', async () => {
  const bad: EgressRule[][] = [
    [{ name: 'deny-inject', match: { host: 'a.test' }, action: { allow: false, inject: [{ header: 'X', secret: 's' }] } }],
    [{ name: 'port-only', match: { host: 'a.test', port: 8443 } as EgressRule['match'], action: { allow: true } }],
    [{ name: 'cidr', match: { host: '10.0.0.0/8' }, action: { allow: true } }],
    [
      { name: 'a', match: { host: 'a.test', scheme: 'http', port: 8000 }, action: { allow: true } },
      { name: 'b', match: { host: 'a.test', scheme: 'https', port: 8000 }, action: { allow: true } },
    ],
  ];
  for (const rules of bad) {
    await assert.rejects(Sandbox.create('base', { ...conn(), network: { rules } }), InvalidArgumentError, rules[0].name);
    const res = await fetch(`${p.apiUrl}/sandboxes`, {
      method: 'POST', headers: { 'X-API-Key': p.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ templateID: 'base', network: { rules } }),
    });
    assert.equal(res.status, 400, `${rules[0].name}: ${await res.text()}`);
  }
  const listed = await (await fetch(`${p.apiUrl}/sandboxes`, { headers: { 'X-API-Key': p.apiKey } })).json() as unknown[];
  assert.equal(listed.length, 0, 'nothing was left behind');
});

test('the official e2b SDK: allowOut host names with denyOut all, header transforms, updateNetwork', async () => {
  const sbx = await E2bSandbox.create('base', {
    network: {
      allowOut: ({ rules }) => [...rules.keys(), 'open.example.test'],
      denyOut: ({ allTraffic }) => [allTraffic],
      rules: { 'api.example.test': [{ transform: { headers: { 'X-Api-Key': E2B_SECRET } } }] },
    },
  });
  const ours = await Sandbox.connect(sbx.sandboxId, conn());
  try {
    const ok = await curl(ours, 'https://api.example.test/e2b');
    assert.equal(ok.status, 200, ok.body);
    assert.equal(inet.requests().find((r) => r.path === '/e2b')!.headers!['x-api-key'], E2B_SECRET);
    assert.equal((await curl(ours, 'http://open.example.test/plain')).status, 200, 'allowOut names cover http too');
    assert.equal((await curl(ours, 'https://example.test/')).status, 403, 'a host allowOut does not name: denied by denyOut');
    // A port no rule covers follows layer 3 (docs/egress.md "E2B's network options"): the learned
    // addresses of allowOut's names are allowed on any port, everything else falls to denyOut.
    const learned = await ours.commands.run(`curl -s -m 10 -o /dev/null -w '%{http_code}' http://${INTERNET_ADDRESS}:8081/ || true`);
    assert.equal(learned.stdout.trim(), '200', 'api.example.test resolves here: its address is allowed on any port');
    const direct = await ours.commands.run(`curl -s -m 3 -o /dev/null -w '%{http_code}' http://${OTHER_ADDRESS}:8081/ || true`);
    assert.equal(direct.stdout.trim(), '000', 'an address no allowOut entry names is denied by denyOut');

    // Omitted fields clear: allowOut and the transforms go, everything is allowed again at layer 3.
    await sbx.updateNetwork({});
    const after = await ours.commands.run(`curl -s -m 10 -o /dev/null -w '%{http_code}' http://${OTHER_ADDRESS}:8081/`);
    assert.equal(after.stdout.trim(), '200');
    const n = inet.requests().length;
    // Not steered any more: curl reaches the upstream itself and does not trust its certificate.
    const tlsDirect = await ours.commands.run(`curl -s -m 10 -k --resolve api.example.test:443:${INTERNET_ADDRESS} -o /dev/null -w '%{http_code}' https://api.example.test/after`);
    assert.equal(tlsDirect.stdout.trim(), '200');
    assert.equal(inet.requests().slice(n).find((r) => r.path === '/after')!.headers!['x-api-key'], undefined, 'no transform after the update');
  } finally {
    await sbx.kill();
  }
});

test('the CLI: --network-rules FILE', async () => {
  const file = `${p.dataDir}/rules.yaml`;
  writeFileSync(file, 'rules:\n  - name: only-open\n    match: { host: open.example.test, scheme: https }\n    action: { allow: true }\n');
  const out = await new Promise<string>((res, rej) => execFile(process.execPath, [SVC_BIN, 'sandbox', 'create', '--template', 'base', '--network-rules', file, '--json'],
    { env: { ...process.env, SVC_DATA_DIR: p.dataDir } }, (err, stdout, stderr) => err ? rej(new Error(stderr)) : res(stdout)));
  const id = (JSON.parse(out) as { sandboxId: string }).sandboxId;
  const sbx = await Sandbox.connect(id, conn());
  try {
    assert.equal((await curl(sbx, 'https://open.example.test/cli')).status, 200);
    assert.equal((await curl(sbx, 'https://api.example.test/cli')).status, 403);
  } finally {
    await sbx.kill();
  }
});

test('rules aimed at the platform itself (the master on the host\'s loopback, the sandbox pool, cloud metadata) are refused: 403, nothing contacted, whatever the rules say', async () => {
  const masterPort = Number(String(p.env.SVC_MASTER_LISTEN).split(':')[1]);
  const sbx = await Sandbox.create('base', {
    ...conn(),
    network: {
      rules: [
        { name: 'the-master', match: { host: '127.0.0.1', scheme: 'http', port: masterPort }, action: { allow: true } },
        { name: 'another-sandbox', match: { host: '10.210.0.6', scheme: 'http', port: 49983 }, action: { allow: true } },
        { name: 'metadata', match: { host: '169.254.169.254', scheme: 'http', port: 80 }, action: { allow: true } },
      ],
    },
  });
  try {
    // Any address on a rule's port reaches the egress proxy; the Host decides where it would go.
    const attempt = async (host: string, port: number, path: string) => {
      const r = await sbx.commands.run(`curl -s -m 15 -H 'Host: ${host}:${port}' -w '\\n%{http_code}' 'http://${INTERNET_ADDRESS}:${port}${path}'`, { timeoutMs: 30_000 }).catch((e) => e.result ?? e);
      const lines = String(r.stdout ?? '').trim().split('\n');
      return { status: Number(lines.pop()), body: lines.join('\n') };
    };
    const master = await attempt('127.0.0.1', masterPort, '/v1/sandboxes');
    assert.equal(master.status, 403, master.body);
    assert.match(master.body, /127\.0\.0\.1 is a loopback address \(the host itself\); the egress proxy never connects there/);
    assert.doesNotMatch(master.body, /envdAccessToken|sandboxId/, 'the master\'s list never reaches the sandbox');
    const other = await attempt('10.210.0.6', 49983, '/health');
    assert.equal(other.status, 403, other.body);
    assert.match(other.body, /is in the sandbox address pool/);
    const metadata = await attempt('169.254.169.254', 80, '/latest/meta-data/');
    assert.equal(metadata.status, 403, metadata.body);
    assert.match(metadata.body, /is link-local/);
    let events: Array<Record<string, unknown>> = [];
    for (let i = 0; i < 50 && events.length < 3; i++) {
      events = audit().filter((r) => r.type === 'security_event' && r.reason === 'platform_address' && r.sandbox_id === sbx.sandboxId);
      if (events.length < 3) await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(events.map((e) => e.rule).sort(), ['another-sandbox', 'metadata', 'the-master']);
  } finally {
    await sbx.kill();
  }
});

/** A JWT checked against a JWKS with node:crypto alone: not the issuer's own code. */
function verifyAgainstJwks(token: string, jwks: { keys: Array<{ kid: string } & Record<string, unknown>> }): { header: Record<string, unknown>; claims: Record<string, unknown> } {
  const [h, c, s] = token.split('.');
  const header = JSON.parse(Buffer.from(h!, 'base64url').toString()) as Record<string, unknown>;
  const claims = JSON.parse(Buffer.from(c!, 'base64url').toString()) as Record<string, unknown>;
  const jwk = jwks.keys.find((k) => k.kid === header.kid);
  assert.ok(jwk, `the JWKS publishes the token's key ${String(header.kid)}`);
  const key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
  assert.ok(verifySignature('sha256', Buffer.from(`${h}.${c}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(s!, 'base64url')), 'the signature verifies');
  return { header, claims };
}

test('teams, the vault and workload identity through the official SDK: a secret and a minted token reach the upstream and nowhere else; another team sees nothing', async () => {
  const VALUE = 'vault-value-7f3e9a1c-only-upstream';
  const run = Date.now().toString(36);
  const a = await Team.create(`e2e-a-${run}`, conn());
  const b = await Team.create(`e2e-b-${run}`, conn());
  const asA = { apiKey: a.apiKey };
  const asB = { apiKey: b.apiKey };
  await E2bSecret.create('upstream-token', VALUE, asA);
  const sbx = await E2bSandbox.create('base', {
    ...asA,
    network: {
      allowOut: ['api.example.test'],
      denyOut: [ALL_TRAFFIC],
      rules: {
        'api.example.test': [{
          transform: ({ iam }) => ({ headers: { Authorization: `Bearer ${E2bSecret.fill('upstream-token')}`, 'X-Workload-Token': iam.tokens.aws } }),
        }],
      },
    },
    iam: { tokens: { aws: E2bSecret.iamToken({ audience: 'sts.amazonaws.com', tokenType: 'JWT-SVID' }) } },
  });
  const ours = await Sandbox.connect(sbx.sandboxId, { ...conn(), apiKey: a.apiKey });
  try {
    const r = await curl(ours, 'https://api.example.test/vault');
    assert.equal(r.status, 200, r.body);
    const seen = inet.requests().find((q) => q.path === '/vault')!;
    assert.equal(seen.headers!.authorization, `Bearer ${VALUE}`, 'the upstream receives the secret\'s value');
    const token = String(seen.headers!['x-workload-token']);
    const jwks = await (await fetch(`${p.apiUrl}/.well-known/jwks.json`)).json() as { keys: Array<{ kid: string }> };
    const discovery = await (await fetch(`${p.apiUrl}/.well-known/openid-configuration`)).json() as { issuer: string; jwks_uri: string };
    const { header, claims } = verifyAgainstJwks(token, jwks);
    assert.equal(header.alg, 'ES256');
    assert.equal(claims.aud, 'sts.amazonaws.com', 'the audience exactly as registered');
    assert.equal(claims.iss, discovery.issuer);
    assert.equal(claims.sub, `spiffe://svc.local/team/${a.teamId}/sandbox/${sbx.sandboxId}`);
    assert.ok(Number(claims.exp) - Number(claims.iat) <= 3600 && Number(claims.exp) > Date.now() / 1000, 'an hour at most, not expired');

    // Nothing of the value or the token inside the sandbox, in any read, log or the database.
    const inside = await ours.commands.run('env; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"; grep -rs "vault-value" /etc /root /home /tmp 2>/dev/null || true', { timeoutMs: 30_000 });
    assert.ok(!inside.stdout.includes(VALUE) && !inside.stdout.includes(token), 'the sandbox never sees the value or the token');
    assert.ok(!JSON.stringify(await E2bSandbox.getInfo(sbx.sandboxId, asA)).includes(VALUE));
    for (const file of [`${p.dataDir}/master.sqlite`, auditPath(), p.logFile, `${p.dataDir}/log/svc-api/audit.jsonl`]) {
      const bytes = readFileSync(file);
      assert.ok(!bytes.includes(Buffer.from(VALUE)), `${file} does not hold the secret's value`);
      assert.ok(!bytes.includes(Buffer.from(token)), `${file} does not hold the minted token`);
    }

    // Team B: none of A's sandbox, secret or data plane.
    await assert.rejects(E2bSandbox.connect(sbx.sandboxId, asB), (e: Error) => e.name === 'SandboxNotFoundError', 'B cannot connect to A\'s sandbox');
    assert.equal(await E2bSecret.exists('upstream-token', asB), false);
    await assert.rejects(
      E2bSandbox.create('base', { ...asB, network: { allowOut: ['api.example.test'], rules: { 'api.example.test': [{ transform: { headers: { Authorization: E2bSecret.fill('upstream-token') } } }] } } }),
      (e: Error) => /upstream-token/.test(e.message), 'a placeholder of a secret the team lacks fails the create, naming it',
    );
    const bSbx = await E2bSandbox.create('base', asB);
    try {
      const bToken = (await fetch(`${p.apiUrl}/sandboxes/${bSbx.sandboxId}`, { headers: { 'X-API-Key': b.apiKey } }).then((x) => x.json()) as { envdAccessToken: string }).envdAccessToken;
      const cross = await fetch(`${p.sandboxUrl}/health`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': bToken } });
      const crossRun = await fetch(`${p.sandboxUrl}/process.Process/List`, {
        method: 'POST', headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': bToken, 'content-type': 'application/json' }, body: '{}',
      });
      assert.equal(crossRun.status, 401, `B's envd token opens nothing in A's sandbox (health: ${cross.status})`);
    } finally {
      await bSbx.kill();
    }
  } finally {
    await sbx.kill();
  }
});
