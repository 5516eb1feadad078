/**
 * A change of a sandbox's policy through the admin API ends the connections the old policy let
 * open (docs/egress.md "Changing a policy"): its CONNECT tunnels, its TCP tunnels, its keep-alive
 * connections; the same policy sent again ends nothing, and other sandboxes' connections stay.
 * In-process, and with the data path in two worker processes (each applies the change to its
 * replica and closes what it holds before the PUT answers).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { silentLogger } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';
import { egressWorkerSourceEntry } from './worker.ts';

const TOKEN = 'policy-change-token';
let dir: string;
let echo: net.Server;
let echoPort: number;
/** A SOCKS5 server without authentication standing in for the operator's proxy: it connects where it is asked. */
let socks: net.Server;
let socksPort: number;

function listen(server: net.Server): Promise<number> {
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r((server.address() as net.AddressInfo).port)));
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-policy-change-'));
  echo = net.createServer((s) => { s.on('error', () => { /* the proxy resets it */ }); s.pipe(s); });
  echoPort = await listen(echo);
  socks = net.createServer((c) => {
    c.on('error', () => { /* ended by the proxy */ });
    c.once('data', () => {
      c.write(Buffer.from([5, 0]));
      c.once('data', (req: Buffer) => {
        const up = net.connect(req.readUInt16BE(8), `${req[4]}.${req[5]}.${req[6]}.${req[7]}`, () => {
          c.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
          c.pipe(up).pipe(c);
        });
        up.on('error', () => c.destroy());
        c.once('close', () => up.destroy());
      });
    });
  });
  socksPort = await listen(socks);
});

after(async () => {
  echo?.close();
  socks?.close();
  await rm(dir, { recursive: true, force: true });
});

const allow = (sandboxId: string, address: string): SandboxEgressPolicy => ({
  sandboxId, address, rules: [{ name: 'echo', match: { scheme: 'https', port: echoPort, host: 'echo.test' }, action: { allow: true } }],
});
const denyAll = (sandboxId: string, address: string): SandboxEgressPolicy => ({
  sandboxId, address, rules: [{ name: 'nothing', match: { host: 'echo.test' }, action: { allow: false } }],
});

async function admin(proxy: EgressProxy, method: 'PUT' | 'DELETE', policy: SandboxEgressPolicy): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${proxy.adminPort}/admin/policies/${policy.sandboxId}`, {
    method, headers: { [EGRESS_ADMIN_TOKEN_HEADER]: TOKEN, ...(method === 'PUT' ? { 'content-type': 'application/json' } : {}) },
    ...(method === 'PUT' ? { body: JSON.stringify(policy) } : {}),
  });
  await res.arrayBuffer();
  return res.status;
}

/** An open connection that echoes: a CONNECT tunnel through the HTTP listener, or a TCP tunnel. */
interface Open { socket: net.Socket; closed: Promise<void>; isClosed(): boolean }

async function openTunnel(proxy: EgressProxy, from: string, kind: 'connect' | 'tcp'): Promise<Open> {
  const socket = net.connect({ port: kind === 'connect' ? proxy.httpPort : proxy.tunnelPort, host: '127.0.0.1', localAddress: from });
  socket.on('error', () => { /* the proxy's reset is what is tested */ });
  let closed = false;
  const whenClosed = new Promise<void>((r) => socket.once('close', () => { closed = true; r(); }));
  await new Promise<void>((r) => socket.once('connect', () => r()));
  if (kind === 'connect') {
    socket.write(`CONNECT echo.test:${echoPort} HTTP/1.1\r\nHost: echo.test:${echoPort}\r\n\r\n`);
    const head = await new Promise<string>((r) => socket.once('data', (b: Buffer) => r(b.toString())));
    assert.match(head, /^HTTP\/1\.1 200 /);
  }
  await echoes(socket);
  return { socket, closed: whenClosed, isClosed: () => closed };
}

async function echoes(socket: net.Socket): Promise<void> {
  socket.write('ping');
  const got = await new Promise<string>((r) => socket.once('data', (b: Buffer) => r(b.toString())));
  assert.equal(got, 'ping');
}

async function scenario(proxy: EgressProxy, kinds: Array<'connect' | 'tcp'>): Promise<void> {
  assert.equal(await admin(proxy, 'PUT', allow('sbx-a', '127.0.0.1')), 200);
  assert.equal(await admin(proxy, 'PUT', allow('sbx-b', '127.0.0.2')), 200);
  // Several of each, so that with two workers both hold some.
  const open = async (from: string) => Promise.all(kinds.flatMap((k) => [1, 2, 3].map(() => openTunnel(proxy, from, k))));
  const mine = await open('127.0.0.1');
  const others = await open('127.0.0.2');

  assert.equal(await admin(proxy, 'PUT', allow('sbx-a', '127.0.0.1')), 200);
  for (const t of mine) await echoes(t.socket);
  assert.ok(mine.every((t) => !t.isClosed()), 'the same policy again ends nothing');

  assert.equal(await admin(proxy, 'PUT', denyAll('sbx-a', '127.0.0.1')), 200);
  // Closed before the PUT answered; the close reaches the client a moment later.
  await Promise.race([Promise.all(mine.map((t) => t.closed)), new Promise((r) => setTimeout(r, 2_000))]);
  assert.ok(mine.every((t) => t.isClosed()), 'narrowing ended every tunnel of the sandbox');
  for (const t of others) await echoes(t.socket);

  const again = await open('127.0.0.2');
  assert.equal(await admin(proxy, 'DELETE', allow('sbx-b', '127.0.0.2')), 204);
  await Promise.race([Promise.all([...others, ...again].map((t) => t.closed)), new Promise((r) => setTimeout(r, 2_000))]);
  assert.ok([...others, ...again].every((t) => t.isClosed()), 'deleting the policy ended every tunnel of the sandbox');
}

const common = () => ({
  bind: '127.0.0.1', httpPort: 0, httpsPort: 0, tunnelPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: TOKEN,
  caDir: join(dir, 'ca'), resolve: { 'echo.test': '127.0.0.1' },
  upstreamProxy: { kind: 'socks5' as const, host: '127.0.0.1', port: socksPort },
  logger: silentLogger(),
});

test('in-process: a changed or deleted policy ends the sandbox\'s CONNECT and TCP tunnels', async () => {
  const proxy = await startEgressProxy({ ...common(), auditLogPath: join(dir, 'in-process.jsonl'), originalDestination: async () => ({ ip: '127.0.0.1', port: echoPort }) });
  try {
    await scenario(proxy, ['connect', 'tcp']);
  } finally {
    await proxy.close();
  }
});

test('with two worker processes: every worker ends the tunnels it holds before the PUT answers', async () => {
  const proxy = await startEgressProxy({ ...common(), auditLogPath: join(dir, 'workers.jsonl'), workers: { count: 2, entry: egressWorkerSourceEntry() } });
  try {
    await scenario(proxy, ['connect']);
  } finally {
    await proxy.close();
  }
});
