import net, { type Server, type Socket } from 'node:net';
import type { Logger } from '@svc/common';
import type { EgressTcpRecord } from '@svc/contracts/egress-audit';
import { auditTimestamp } from './audit-log.ts';
import type { AuditSink } from './audit-sink.ts';
import { plainIpv4 } from './ipv4.ts';
import type { Destination } from './original-destination.ts';
import type { PlatformGuard } from './platform-guard.ts';
import type { PolicyStore } from './policy-store.ts';
import type { DialTarget, ProxyVia } from './proxy-via.ts';
import { SandboxConnections } from './sandbox-connections.ts';
import { endThenDestroy } from './tunnel-exchange.ts';

export interface TcpTunnelDeps {
  store: PolicyStore;
  audit: AuditSink;
  logger: Logger;
  /** Where the sandbox's connection was going before its node's DNAT sent it here. */
  originalDestination: (socket: Socket) => Promise<Destination | undefined>;
  /** The proxy a sandbox's traffic goes through: its own egressProxy, else the operator's; undefined: none. */
  viaFor: (sandboxIp: string) => ProxyVia | undefined;
  dial: (target: DialTarget, via: ProxyVia) => Promise<Socket>;
  /** Nothing sent either way for this long closes both sides. */
  ioTimeoutMs: number;
  /** What the proxy never connects to for a sandbox; absent: no such refusal (tests on loopback). */
  platform?: PlatformGuard;
}

/**
 * The tunnel listener (docs/egress.md "Bring your own proxy"): a tunneled sandbox's TCP that is
 * not HTTP(S) for a rule arrives here after its node's layer-3 filtering, and goes on through
 * the sandbox's SOCKS5 proxy (or the operator's) to where it was going. Fails closed: with no
 * proxy to use, or when the proxy cannot open the tunnel, the sandbox's connection is reset;
 * nothing is ever sent direct.
 */
export function createTcpTunnelServer(deps: TcpTunnelDeps): { server: Server; destroyAll(): void; closeFor(address: string): number } {
  // Open tunnels by sandbox, so that close() does not wait for a sandbox's long-lived connection
  // and a change of its policy ends them (data-path.ts).
  const open = new SandboxConnections();
  const server = net.createServer({ pauseOnConnect: true }, (socket) => {
    open.add(plainIpv4(socket.remoteAddress), socket);
    void tunnel(deps, socket).catch((err: unknown) => {
      deps.logger.error({ err, sandboxIp: socket.remoteAddress }, 'egress tunnel failed inside the proxy');
      socket.destroy();
    });
  });
  return { server, destroyAll: () => open.destroyAll(), closeFor: (address) => open.closeFor(address) };
}

async function tunnel(deps: TcpTunnelDeps, client: Socket): Promise<void> {
  const started = performance.now();
  const sandboxIp = plainIpv4(client.remoteAddress);
  client.on('error', (err) => deps.logger.debug({ err: err.message, sandboxIp }, 'egress tunnel: the sandbox side failed'));
  const policy = deps.store.ready ? deps.store.forAddress(sandboxIp) : undefined;
  const record: EgressTcpRecord = {
    type: 'tcp', ts: auditTimestamp(), sandbox_ip: sandboxIp, ...(policy ? { sandbox_id: policy.sandboxId } : {}),
    dst_ip: '', dst_port: 0, via: '', bytes_in: 0, bytes_out: 0, latency_ms: 0, status: 'failed',
  };
  const fail = (reason: string) => {
    record.reason = reason;
    record.latency_ms = Math.round(performance.now() - started);
    deps.audit.write(record);
    // A reset, not a clean end: the sandbox's program sees the connection refused, as with no route.
    client.resetAndDestroy();
  };
  if (!deps.store.ready) return fail('the proxy has not loaded the egress policies yet (not ready)');
  if (deps.platform?.listed === false) return fail('the proxy has not read the platform\'s addresses from the master yet (not ready)');
  const via = deps.viaFor(sandboxIp);
  if (!via) return fail('no proxy is set for this sandbox');
  record.via = `${via.host}:${via.port}`;
  const dest = await deps.originalDestination(client);
  if (!dest) return fail('the connection\'s original destination is not in the conntrack table');
  Object.assign(record, { dst_ip: dest.ip, dst_port: dest.port });
  // Through the operator's proxy the connection is still the platform's; a sandbox's own proxy
  // opens it on its side, where only metadata and the platform's listed endpoints are refused.
  const refusal = via.fromSandbox ? deps.platform?.refusalThroughSandboxProxy(dest.ip, dest.port) : deps.platform?.refusal(dest.ip, dest.port);
  if (refusal) return fail(`${dest.ip}:${dest.port} is the platform's own: ${dest.ip} ${refusal}; not contacted`);
  let upstream: Socket;
  try {
    upstream = await deps.dial({ ip: dest.ip, port: dest.port }, via);
  } catch (err) {
    return fail((err as Error).message);
  }
  if (client.destroyed) { upstream.destroy(); return; }
  record.status = 'closed';
  splice(client, upstream, deps.ioTimeoutMs, (msg) => deps.logger.debug({ sandboxIp, dst: `${dest.ip}:${dest.port}` }, msg), (inBytes, outBytes) => {
    record.bytes_in = inBytes;
    record.bytes_out = outBytes;
    record.latency_ms = Math.round(performance.now() - started);
    deps.audit.write(record);
  });
}

/**
 * Pipes two sockets both ways until both close, counting bytes (in: from the sandbox), with an
 * idle timeout over both; the first side to close has the other end once what it holds is sent
 * (endThenDestroy), and `done` runs once with the counts.
 */
function splice(client: Socket, upstream: Socket, idleMs: number, debugLog: (msg: string) => void, done: (bytesIn: number, bytesOut: number) => void): void {
  let bytesIn = 0;
  let bytesOut = 0;
  let open = 2;
  const idle = setTimeout(() => { client.destroy(); upstream.destroy(); }, idleMs).unref();
  const closed = (other: Socket) => () => {
    if (--open > 0) { endThenDestroy(other); return; }
    clearTimeout(idle);
    done(bytesIn, bytesOut);
  };
  client.once('close', closed(upstream));
  upstream.once('close', closed(client));
  client.on('data', (b: Buffer) => { bytesIn += b.length; idle.refresh(); });
  upstream.on('data', (b: Buffer) => { bytesOut += b.length; idle.refresh(); });
  // The sandbox side's errors are logged where it was accepted; either side's error ends in its 'close', which ends the other.
  upstream.on('error', (err) => debugLog(`egress tunnel: the upstream side failed: ${err.message}`));
  client.pipe(upstream);
  upstream.pipe(client);
  client.resume();
}
