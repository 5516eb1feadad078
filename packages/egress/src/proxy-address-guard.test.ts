/**
 * The dial-time check of a sandbox's own SOCKS5 proxy (proxy-address-guard.ts): the guard's
 * verdicts on a stub master, then an in-process egress proxy whose sandbox's proxy name starts
 * resolving into the platform (DNS rebinding, by changing the proxy's `resolve` overrides): the
 * connection fails closed, and the address it now names never sees a connection.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { badRequest, forbidden, silentLogger } from '@svc/common';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';
import { ProxyAddressGuard } from './proxy-address-guard.ts';
import { ProxyDialError } from './proxy-via.ts';
import { readAuditRecords } from './testing/audit-file.ts';

/** A stub master: refuses the addresses in `refused`, fails while `down`, counts the questions. */
function stubMaster(refused = new Set<string>()) {
  const m = { asked: 0, down: false as boolean | 'hang', refused };
  const check = async (ip: string, port: number) => {
    m.asked++;
    await new Promise((r) => setTimeout(r, 5));
    if (m.down) throw new Error('connect ECONNREFUSED 127.0.0.1:9090');
    if (m.refused.has(`${ip}:${port}`)) throw badRequest(`network.egressProxy ${ip}:${port} is not allowed: ${ip} is in the sandbox address pool`);
  };
  return { m, check };
}

async function dialError(p: Promise<void>): Promise<ProxyDialError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof ProxyDialError, `expected a ProxyDialError, got ${String(err)}`);
  return err;
}

test('the guard: an allowed address is asked once a minute; a refusal is a ProxyDialError for ten seconds; concurrent dials share a question', async () => {
  let now = 1_000_000;
  const { m, check } = stubMaster(new Set(['10.11.0.7:1080']));
  const guard = new ProxyAddressGuard(check, silentLogger(), () => now);
  await Promise.all([1, 2, 3].map(() => guard.allow('192.0.2.10', 1080, 'SOCKS5 proxy socks.test:1080')));
  assert.equal(m.asked, 1, 'three dials at once, one question');
  now += 59_000;
  await guard.allow('192.0.2.10', 1080, 'SOCKS5 proxy socks.test:1080');
  assert.equal(m.asked, 1, 'still fresh');
  now += 2_000;
  await guard.allow('192.0.2.10', 1080, 'SOCKS5 proxy socks.test:1080');
  assert.equal(m.asked, 2, 'asked again after a minute');

  const refused = await dialError(guard.allow('10.11.0.7', 1080, 'SOCKS5 proxy socks.test:1080'));
  assert.equal(refused.code, 'EPROXYADDR');
  assert.equal(refused.message, 'the SOCKS5 proxy socks.test:1080 is refused: network.egressProxy 10.11.0.7:1080 is not allowed: 10.11.0.7 is in the sandbox address pool');
  await dialError(guard.allow('10.11.0.7', 1080, 'SOCKS5 proxy socks.test:1080'));
  assert.equal(m.asked, 3, 'a refusal stands a while unasked');
  m.refused.clear();
  now += 10_001;
  await guard.allow('10.11.0.7', 1080, 'SOCKS5 proxy socks.test:1080');
  assert.equal(m.asked, 4, 'and is asked again after ten seconds');
  await guard.allow('192.0.2.10', 1081, 'SOCKS5 proxy socks.test:1081');
  assert.equal(m.asked, 5, 'another port is another question');
});

test('the guard with the master down: a never-checked address is not dialled; one allowed within ten minutes is, and the master is not asked again for ten seconds', async () => {
  let now = 5_000_000;
  const { m, check } = stubMaster();
  const guard = new ProxyAddressGuard(check, silentLogger(), () => now);
  m.down = true;
  const unchecked = await dialError(guard.allow('192.0.2.20', 1080, 'SOCKS5 proxy socks.test:1080'));
  assert.equal(unchecked.code, 'EPROXYCHECK');
  assert.match(unchecked.message, /^the SOCKS5 proxy socks\.test:1080 resolves to 192\.0\.2\.20:1080, which the platform could not check \(connect ECONNREFUSED 127\.0\.0\.1:9090\): not dialled$/);

  m.down = false;
  await guard.allow('192.0.2.10', 1080, 'SOCKS5 proxy socks.test:1080');
  m.down = true;
  now += 5 * 60_000;
  const asked = m.asked;
  await guard.allow('192.0.2.10', 1080, 'SOCKS5 proxy socks.test:1080');
  assert.equal(m.asked, asked + 1, 'asked, did not answer, dialled on the earlier check');
  await guard.allow('192.0.2.10', 1080, 'SOCKS5 proxy socks.test:1080');
  assert.equal(m.asked, asked + 1, 'not asked again at once');
  now += 6 * 60_000;
  assert.equal((await dialError(guard.allow('192.0.2.10', 1080, 'SOCKS5 proxy socks.test:1080'))).code, 'EPROXYCHECK', 'an earlier check older than ten minutes does not count');
  // A 403 (a wrong token) is no verdict on the address either: not dialled.
  const wrongToken = new ProxyAddressGuard(async () => { throw forbidden('X-Svc-Admin-Token must equal egress.admin_token'); }, silentLogger());
  assert.equal((await dialError(wrongToken.allow('192.0.2.30', 1080, 'SOCKS5 proxy x:1080'))).code, 'EPROXYCHECK');
});

// ---- an egress proxy whose sandbox's proxy name is rebound into the platform ----

let dir: string;
let proxy: EgressProxy;
const master = stubMaster();
const resolve: Record<string, string> = {};
/** A minimal SOCKS5 server (no auth, CONNECT to IPv4): what the sandbox's own proxy would be. */
let socks: net.Server;
/** Listens where the name is rebound to: the platform's endpoint, which must see no connection. */
let platform: net.Server;
let upstream: net.Server;
const seen = { socks: 0, platform: 0 };

function listen(server: net.Server, host: string): Promise<number> {
  return new Promise((r) => server.listen(0, host, () => r((server.address() as net.AddressInfo).port)));
}

function socks5Server(): net.Server {
  return net.createServer((c) => {
    seen.socks++;
    c.once('data', () => {
      c.write(Buffer.from([5, 0]));
      c.once('data', (req: Buffer) => {
        const ip = [...req.subarray(4, 8)].join('.');
        const up = net.connect(req.readUInt16BE(8), ip, () => {
          c.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
          c.pipe(up);
          up.pipe(c);
        });
        up.on('error', () => c.destroy());
      });
    });
    c.on('error', () => { /* the test's client may go first */ });
  });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-guard-'));
  socks = socks5Server();
  platform = net.createServer((c) => { seen.platform++; c.destroy(); });
  upstream = net.createServer((c) => c.end('hello from upstream'));
  const socksPort = await listen(socks, '127.0.0.1');
  const upstreamPort = await listen(upstream, '127.0.0.1');
  // The same port at the rebound address, as a rebinding attacker would keep it.
  await new Promise<void>((r, j) => { platform.once('error', j); platform.listen(socksPort, '127.0.0.2', () => r()); });
  master.m.refused.add(`127.0.0.2:${socksPort}`);
  resolve['socks.rebind.test'] = '127.0.0.1';
  proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, tunnelPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: 't',
    caDir: join(dir, 'ca'), auditLogPath: join(dir, 'access.jsonl'), resolve,
    policySource: async () => [{ sandboxId: 'sbx-rebind', address: '127.0.0.1', rules: [], tunnel: { address: `socks.rebind.test:${socksPort}` } }],
    originalDestination: async () => ({ ip: '127.0.0.1', port: upstreamPort }),
    proxyAddressCheck: master.check,
    logger: silentLogger(),
  });
  while (!proxy.ready()) await new Promise((r) => setTimeout(r, 10));
});

after(async () => {
  await proxy?.close();
  for (const s of [socks, platform, upstream]) s?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A sandbox connection to the tunnel listener: what it read, and whether it was reset. */
function sandboxConnection(): Promise<{ text: string; reset: boolean }> {
  return new Promise((resolveAnswer) => {
    const s = net.connect(proxy.tunnelPort, '127.0.0.1');
    let text = '';
    s.on('data', (b: Buffer) => { text += b.toString(); });
    s.on('error', () => resolveAnswer({ text, reset: true }));
    s.on('close', () => resolveAnswer({ text, reset: false }));
  });
}

test('a sandbox\'s proxy name that resolves into the platform after the create: the tunnel fails closed, and the platform sees no connection', async () => {
  const first = await sandboxConnection();
  assert.deepEqual(first, { text: 'hello from upstream', reset: false }, 'through the SOCKS5 proxy while the name resolves outside the platform');
  assert.equal(seen.socks, 1);

  resolve['socks.rebind.test'] = '127.0.0.2';
  const rebound = await sandboxConnection();
  assert.deepEqual(rebound, { text: '', reset: true });
  assert.equal(seen.platform, 0, 'the egress proxy never connected to the address the name was rebound to');
  assert.equal(seen.socks, 1, 'nor went anywhere else');

  let records: Array<Record<string, unknown>> = [];
  for (let i = 0; i < 100 && records.length < 2; i++) { await new Promise((r) => setTimeout(r, 20)); records = (await readAuditRecords(join(dir, 'access.jsonl'))).filter((r) => r.type === 'tcp'); }
  assert.equal(records.length, 2);
  assert.equal(records[0]!.status, 'closed');
  assert.equal(records[1]!.status, 'failed');
  assert.match(String(records[1]!.reason), /^the SOCKS5 proxy socks\.rebind\.test:\d+ is refused: network\.egressProxy 127\.0\.0\.2:\d+ is not allowed: 127\.0\.0\.2 is in the sandbox address pool$/);
});
