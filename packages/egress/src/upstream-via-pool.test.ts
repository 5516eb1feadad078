/**
 * Pooled upstream connections opened through a sandbox's own SOCKS5 proxy (E2B's
 * `network.egressProxy`) are reused only by sandboxes that would open them the same way, with the
 * same credentials (upstream.ts): a proxy lets a connection in once, at its start, so a sandbox
 * naming the same proxy and user with another password must never ride on one it let in.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import type { EgressProxy } from './egress-proxy.ts';
import { sandboxGet, startPoolProxy, upRules } from './testing/pool-fixture.ts';

let dir: string;
let proxy: EgressProxy;
let upstream: http.Server;
let upstreamPort: number;
let socks: net.Server;
const seen = { logins: [] as string[], requests: [] as string[] };

/** A SOCKS5 server (RFC 1928 CONNECT, RFC 1929 username and password) that lets in alice:right only. */
function socksServer(): net.Server {
  return net.createServer((client) => {
    client.on('error', () => { /* a refused client may reset */ });
    let buf = Buffer.alloc(0);
    let stage: 'greeting' | 'auth' | 'request' = 'greeting';
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (stage === 'greeting' && buf.length >= 2 && buf.length >= 2 + buf[1]!) {
        buf = buf.subarray(2 + buf[1]!);
        stage = 'auth';
        client.write(Buffer.from([5, 2]));
      }
      if (stage === 'auth' && buf.length >= 2) {
        const ulen = buf[1]!;
        if (buf.length < 3 + ulen) return;
        const plen = buf[2 + ulen]!;
        if (buf.length < 3 + ulen + plen) return;
        const login = `${buf.subarray(2, 2 + ulen)}:${buf.subarray(3 + ulen, 3 + ulen + plen)}`;
        seen.logins.push(login);
        buf = buf.subarray(3 + ulen + plen);
        if (login !== 'alice:right') { client.end(Buffer.from([1, 1])); return; }
        client.write(Buffer.from([1, 0]));
        stage = 'request';
      }
      if (stage === 'request' && buf.length >= 10 && buf[3] === 1) {
        const ip = [...buf.subarray(4, 8)].join('.');
        const port = buf.readUInt16BE(8);
        const rest = buf.subarray(10);
        client.off('data', onData);
        const out = net.connect(port, ip, () => {
          client.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
          if (rest.length) out.write(rest);
          client.pipe(out).pipe(client);
        });
        out.on('error', () => client.destroy());
      }
    };
    client.on('data', onData);
  });
}

function listen(server: net.Server): Promise<number> {
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r((server.address() as net.AddressInfo).port)));
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-via-pool-'));
  upstream = http.createServer((req, res) => { seen.requests.push(String(req.headers['x-from'])); res.end('upstream'); });
  upstreamPort = await listen(upstream);
  socks = socksServer();
  const socksPort = await listen(socks);
  const rules = upRules(upstreamPort);
  const tunnel = (password: string) => ({ address: `127.0.0.1:${socksPort}`, username: 'alice', password });
  const policies: SandboxEgressPolicy[] = [
    { sandboxId: 'sbx-alice', address: '127.0.0.1', rules, tunnel: tunnel('right') },
    { sandboxId: 'sbx-guess', address: '127.0.0.2', rules, tunnel: tunnel('guessed') },
  ];
  proxy = await startPoolProxy(dir, policies);
});

after(async () => {
  await proxy?.close();
  upstream?.closeAllConnections();
  upstream?.close();
  socks?.close();
  await rm(dir, { recursive: true, force: true });
});

/** One request from a sandbox address, on its own client connection; the status line. */
const get = (localAddress: string, from: string) => sandboxGet(proxy.httpPort, localAddress, `up.test:${upstreamPort}`, from);

test('a sandbox naming the same SOCKS5 proxy and user with another password never reuses a connection the proxy let in for the right one', async () => {
  assert.match(await get('127.0.0.1', 'alice'), /^HTTP\/1\.1 200 /);
  assert.deepEqual(seen.logins, ['alice:right']);
  const guessed = await get('127.0.0.2', 'guess');
  assert.match(guessed, /^HTTP\/1\.1 502 /, 'its own login is asked for, and refused');
  assert.deepEqual(seen.logins, ['alice:right', 'alice:guessed']);
  assert.deepEqual(seen.requests, ['alice'], 'the upstream never saw the guessing sandbox\'s request');
  assert.match(await get('127.0.0.1', 'alice-again'), /^HTTP\/1\.1 200 /);
  assert.equal(seen.logins.length, 2, 'the right one reuses its pooled connection: no new login');
});
