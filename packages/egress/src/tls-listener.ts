import net, { type Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { ClientHelloReader } from './client-hello.ts';
import { plainIpv4 } from './ipv4.ts';
import type { LeafContexts } from './leaf-contexts.ts';
import { isHostNameSyntax, isIpv4InAnotherForm } from './numeric-host.ts';
import type { Destination } from './original-destination.ts';

/** What the HTTP layer learns about a connection from its TLS side. */
interface TlsConnection {
  sandboxIp: string;
  /**
   * The ClientHello's server name, lower case, no trailing dot; absent when the client sent none.
   * Never an IPv4 address in another form than a dotted quad: such a handshake is refused.
   */
  sni?: string;
  /** The name the leaf was made for: the SNI, or else the original destination's IP. */
  certName: string;
  tlsVersion: string;
  cipher: string;
}

interface TlsHandshakeFailure {
  sandboxIp: string;
  sni: string;
  reason: string;
}

export interface TlsListenerOptions {
  leaves: LeafContexts;
  originalDestination: (socket: Socket) => Promise<Destination | undefined>;
  /** A connection whose handshake completed, to be served as HTTP/1.1. */
  onSecure: (socket: TLSSocket, conn: TlsConnection) => void;
  onHandshakeFailure: (failure: TlsHandshakeFailure) => void;
  /** From accept to the end of the handshake. */
  handshakeTimeoutMs?: number;
  /** Connections of one sandbox that may be before the end of their handshake at once. */
  maxHandshakesPerSandbox?: number;
}

const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;
/**
 * A connection before its handshake holds up to about 32 KB (client-hello.ts: its two buffers,
 * the raw records and the handshake, each capped at MAX_BUFFERED_BYTES, 16 KB and 44 bytes) for
 * up to 10 s; one sandbox may open thousands. 1024 at once holds one sandbox to
 * 1024 × 32 KB = 32 MiB of a worker; past it new ones are closed. It was 256 on 2026-12-01, and
 * a crawler or a parallel downloader opening a few hundred HTTPS connections at once got resets:
 * the 16 KB ClientHello cap, not this count, is what keeps the memory small.
 */
export const MAX_HANDSHAKES_PER_SANDBOX = 1024;

/**
 * The HTTPS listener's TCP side: reads the ClientHello to choose the leaf (for its SNI, or for
 * the original destination's IP when there is none), then hands the socket to TLS with that
 * leaf. A plain tls.Server cannot do this: it asks for a certificate only when SNI is present.
 */
export function createTlsListener(opts: TlsListenerOptions): { server: net.Server; destroyAll(): void } {
  const live = new Set<Socket>();
  const timeoutMs = opts.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  const maxPending = opts.maxHandshakesPerSandbox ?? MAX_HANDSHAKES_PER_SANDBOX;
  /** Connections before the end of their handshake, by sandbox address. */
  const pending = new Map<string, number>();
  const server = net.createServer({ pauseOnConnect: false }, (socket) => {
    live.add(socket);
    socket.once('close', () => live.delete(socket));
    const sandboxIp = plainIpv4(socket.remoteAddress);
    const count = pending.get(sandboxIp) ?? 0;
    if (count >= maxPending) {
      opts.onHandshakeFailure({ sandboxIp, sni: '', reason: `over ${maxPending} connections of this sandbox before the end of their TLS handshake; closed at once` });
      socket.destroy();
      return;
    }
    pending.set(sandboxIp, count + 1);
    let counted = true;
    // Once, when the handshake ends either way (or the socket goes first).
    const done = () => {
      if (!counted) return;
      counted = false;
      const left = (pending.get(sandboxIp) ?? 1) - 1;
      if (left > 0) pending.set(sandboxIp, left);
      else pending.delete(sandboxIp);
    };
    socket.once('close', done);
    acceptTls(socket, opts, timeoutMs, live, done);
  });
  return {
    server,
    destroyAll: () => { for (const s of live) s.destroy(); live.clear(); },
  };
}

function acceptTls(socket: Socket, opts: TlsListenerOptions, timeoutMs: number, live: Set<Socket>, handshakeEnded: () => void): void {
  const sandboxIp = plainIpv4(socket.remoteAddress);
  let failed = false;
  /** The handshake completed: what happens to the connection now is the HTTP server's business. */
  let secure = false;
  const fail = (sni: string, reason: string, s: Socket = socket) => {
    if (failed || secure) return;
    failed = true;
    clearTimeout(deadline);
    handshakeEnded();
    opts.onHandshakeFailure({ sandboxIp, sni, reason });
    s.destroy();
  };
  socket.setNoDelay(true);
  const deadline = setTimeout(() => fail('', `no TLS handshake within ${timeoutMs / 1000} s`), timeoutMs);
  socket.once('close', () => clearTimeout(deadline));

  // Each chunk appended once and read once (client-hello.ts), however finely the client trickles it.
  const hello = new ClientHelloReader();
  const onData = (chunk: Buffer) => {
    const peek = hello.push(chunk);
    if (peek.state === 'incomplete') return;
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.pause();
    if (peek.state === 'not_tls') return fail('', peek.detail);
    const sni = peek.serverName?.toLowerCase().replace(/\.$/, '');
    // Refused, as a Host in that form is (request-target.ts), rather than read as its dotted quad:
    // the SNI is this connection's one source of a server name, which the rules (`sni`), the
    // Host/SNI guard of an inject and the leaf's name all take as text, so `2130706433` passed a
    // deny rule for SNI 127.0.0.1. No conforming client sends it (RFC 6066 3 allows no address in
    // SNI), so nothing is lost, and the leaf is never made for a name no rule could have meant.
    // A dotted quad goes on, as a Host does: the rules compare that form.
    if (sni && isIpv4InAnotherForm(sni)) {
      return fail(sni, `the server name (SNI) ${JSON.stringify(sni)} is an IPv4 address in another form than a dotted quad (four decimal numbers 0 to 255 without leading zeros, as 127.0.0.1); rules compare that form only, so it is refused as such a Host is; send a host name, or no server name (RFC 6066 allows no address there)`);
    }
    // An IPv6 address (or characters no name has) is refused as such a Host is (a 400), with its
    // own reason rather than the certificate's error it met before.
    if (sni && !isHostNameSyntax(sni)) {
      return fail(sni, `the server name (SNI) ${JSON.stringify(sni)} is not a host name or IPv4 address (an IPv6 address, or characters no host name has); the proxy reaches upstreams by name or IPv4 address, as a Host names them; send a host name, or no server name (RFC 6066 allows no address there)`);
    }
    // The bytes go back to the socket's buffer; TLSSocket reads them first (node's initRead).
    socket.unshift(hello.bytes());
    startTls(sni).catch((err: unknown) => fail(sni ?? '', `handshake setup failed: ${(err as Error).message}`));
  };
  const onEnd = () => fail('', hello.bytes().length ? 'the client closed the connection mid-ClientHello' : 'the client closed the connection before its ClientHello');
  socket.on('data', onData);
  socket.once('end', onEnd);
  socket.on('error', (err) => fail('', `connection error before the handshake: ${err.message}`));

  const startTls = async (sni: string | undefined) => {
    let certName = sni;
    if (!certName) {
      const dst = await opts.originalDestination(socket);
      if (socket.destroyed) return fail('', 'the client closed the connection while its original destination was looked up');
      if (!dst) return fail('', 'no server name (SNI) and the original destination is unknown');
      certName = dst.ip;
    }
    let context;
    try {
      context = opts.leaves.forName(certName);
    } catch (err) {
      return fail(sni ?? '', `no certificate for ${JSON.stringify(certName)}: ${(err as Error).message}`);
    }
    const tlsSocket = new TLSSocket(socket, { isServer: true, secureContext: context, ALPNProtocols: ['http/1.1'] });
    live.add(tlsSocket);
    // The TLS socket took over the TCP handle: the raw socket may never report its close.
    tlsSocket.once('close', () => { live.delete(tlsSocket); live.delete(socket); });
    const onTlsError = (err: NodeJS.ErrnoException) => fail(sni ?? '', `TLS handshake failed: ${err.message}`, tlsSocket);
    tlsSocket.on('error', onTlsError);
    tlsSocket.once('close', () => fail(sni ?? '', 'the client closed the connection mid-handshake', tlsSocket));
    tlsSocket.once('secure', () => {
      secure = true;
      clearTimeout(deadline);
      handshakeEnded();
      // From here the HTTP server owns the socket: its error handler and timeouts apply.
      tlsSocket.off('error', onTlsError);
      opts.onSecure(tlsSocket, {
        sandboxIp,
        ...(sni ? { sni } : {}),
        certName: certName as string,
        tlsVersion: tlsSocket.getProtocol() ?? '',
        cipher: tlsSocket.getCipher()?.standardName ?? tlsSocket.getCipher()?.name ?? '',
      });
    });
  };
}
