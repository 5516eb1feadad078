/**
 * The HTTPS listener's TCP side (tls-listener.ts): one sandbox may have only so many
 * connections before the end of their handshake at once (each holds its ClientHello's bytes);
 * past them a new one is closed at once with a tls_handshake failure, and a slot frees when one
 * of them ends. An SNI that is an IPv4 address in another form than a dotted quad fails the
 * handshake, as such a Host is a 400.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import type { LeafContexts } from './leaf-contexts.ts';
import { captureClientHello } from './testing/client-hello-capture.ts';
import { createTlsListener, MAX_HANDSHAKES_PER_SANDBOX } from './tls-listener.ts';

/** A listener on a loopback port whose connections never finish a handshake; `max` its per-sandbox cap (default the module's). */
async function listening(onFailure: (f: { sandboxIp: string; reason: string }) => void, max?: number) {
  const listener = createTlsListener({
    // Never reached: no connection here finishes its ClientHello.
    leaves: {} as LeafContexts,
    originalDestination: async () => undefined,
    onSecure: () => assert.fail('no handshake completes'),
    onHandshakeFailure: onFailure,
    handshakeTimeoutMs: 30_000,
    ...(max === undefined ? {} : { maxHandshakesPerSandbox: max }),
  });
  const port = await new Promise<number>((r) => listener.server.listen(0, '127.0.0.1', () => r((listener.server.address() as net.AddressInfo).port)));
  return { listener, port };
}

test('past the cap of connections mid-handshake a sandbox\'s new connection is closed at once, and audited; a slot frees when one ends', async () => {
  const failures: Array<{ sandboxIp: string; reason: string }> = [];
  const { listener, port } = await listening((f) => failures.push(f), 3);
  const sockets: net.Socket[] = [];
  /** A connection that sent the first bytes of a ClientHello; whether the listener closed it within 300 ms. */
  const open = async (from = '127.0.0.1'): Promise<{ socket: net.Socket; closed: boolean }> => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
    sockets.push(socket);
    socket.on('error', () => { /* a reset is an answer */ });
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.write(Buffer.from([22, 3, 1, 0x02, 0x00, 1, 0, 1]));
    const closed = await new Promise<boolean>((r) => {
      const t = setTimeout(() => r(false), 300);
      socket.once('close', () => { clearTimeout(t); r(true); });
    });
    return { socket, closed };
  };
  try {
    const first = await Promise.all([open(), open(), open()]);
    assert.deepEqual(first.map((c) => c.closed), [false, false, false]);
    assert.equal((await open()).closed, true, 'the fourth is closed at once');
    assert.equal(failures.length, 1);
    assert.match(failures[0]!.reason, /^over 3 connections of this sandbox before the end of their TLS handshake; closed at once$/);
    assert.equal((await open('127.0.0.2')).closed, false, 'another sandbox has its own');
    first[0]!.socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await open()).closed, false, 'a slot freed');
  } finally {
    for (const s of sockets) s.destroy();
    listener.destroyAll();
    listener.server.close();
  }
});

test('by default a sandbox may have 1024 connections mid-handshake: a crawler\'s few hundred parallel ones are not reset', async () => {
  // 256 on 2026-12-01 reset a parallel downloader's connections past the 256th.
  assert.equal(MAX_HANDSHAKES_PER_SANDBOX, 1024);
  const failures: unknown[] = [];
  const { listener, port } = await listening((f) => failures.push(f));
  const sockets: net.Socket[] = [];
  let closed = 0;
  try {
    await Promise.all(Array.from({ length: 400 }, async () => {
      const socket = net.connect({ port, host: '127.0.0.1' });
      sockets.push(socket);
      socket.on('error', () => { /* a reset is counted by close */ });
      socket.once('close', () => closed++);
      await new Promise<void>((r) => socket.once('connect', () => r()));
      socket.write(Buffer.from([22, 3, 1, 0x02, 0x00, 1, 0, 1]));
    }));
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(closed, 0);
    assert.deepEqual(failures, []);
  } finally {
    for (const s of sockets) s.destroy();
    listener.destroyAll();
    listener.server.close();
  }
});

/** A ClientHello of node's TLS client whose SNI is `name`, sent as is (node itself would not send an IP there). */
async function helloFor(name: string): Promise<Buffer> {
  const stand = 'z'.repeat(name.length);
  const hello = await captureClientHello(stand);
  const at = hello.indexOf(stand, 0, 'latin1');
  assert.ok(at > 0 && hello.indexOf(stand, at + 1, 'latin1') === -1, 'the stand-in name is in the ClientHello once');
  return Buffer.concat([hello.subarray(0, at), Buffer.from(name, 'latin1'), hello.subarray(at + name.length)]);
}

test('an SNI of numbers only that is not a dotted quad fails the handshake with the reason, before any certificate, as such a Host is a 400', async () => {
  const asked: string[] = [];
  const failures: Array<{ sni: string; reason: string }> = [];
  const listener = createTlsListener({
    // Records the names a leaf is asked for, and refuses them all: no handshake here completes.
    leaves: { forName: (name: string) => { asked.push(name); throw new Error('no leaf in this test'); } } as unknown as LeafContexts,
    originalDestination: async () => undefined,
    onSecure: () => assert.fail('no handshake completes'),
    onHandshakeFailure: (f) => failures.push(f),
  });
  const port = await new Promise<number>((r) => listener.server.listen(0, '127.0.0.1', () => r((listener.server.address() as net.AddressInfo).port)));
  /** Sends a ClientHello naming `name`; the failure the listener reported once it closed the connection. */
  const handshake = async (name: string) => {
    const hello = await helloFor(name);
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.on('error', () => { /* a reset is an answer */ });
    const closed = new Promise((r) => socket.once('close', r));
    socket.write(hello);
    await closed;
    return failures.at(-1)!;
  };
  try {
    // 127.0.0.1 as getaddrinfo reads it, in the forms request-target.test.ts refuses as a Host.
    for (const name of ['2130706433', '0x7f.0.0.1', '017700000001', '0X7F.1', '127.1', '127.000.0.1', '2130706433.']) {
      const failure = await handshake(name);
      assert.equal(failure.sni, name.toLowerCase().replace(/\.$/, ''), name);
      assert.match(failure.reason, /^the server name \(SNI\) ".*" is an IPv4 address in another form than a dotted quad .*; rules compare that form only, so it is refused as such a Host is; send a host name, or no server name \(RFC 6066 allows no address there\)$/, name);
    }
    // An IPv6 address, or a name no Host could be: refused with the reason, before any certificate.
    for (const name of ['::1', '[::1]', 'fe80::1', 'a..b', 'a b']) {
      const failure = await handshake(name);
      assert.equal(failure.sni, name, name);
      assert.match(failure.reason, /^the server name \(SNI\) ".*" is not a host name or IPv4 address \(an IPv6 address, or characters no host name has\); .*send a host name, or no server name \(RFC 6066 allows no address there\)$/, name);
    }
    assert.deepEqual(asked, [], 'no certificate was asked for any of them');
    // A dotted quad (as a Host may be) and names with numbers in them go on to their certificate.
    for (const name of ['127.0.0.1', '123.example.test', '0xg.1']) {
      assert.match((await handshake(name)).reason, /^no certificate for/, name);
    }
    assert.deepEqual(asked, ['127.0.0.1', '123.example.test', '0xg.1']);
  } finally {
    listener.destroyAll();
    listener.server.close();
  }
});
