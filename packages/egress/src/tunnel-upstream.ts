import type { Socket } from 'node:net';
import tls from 'node:tls';
import { isIpv4 } from './ipv4.ts';
import type { ProxyDeps } from './proxy-deps.ts';
import { ProxyDialError } from './upstream-dial.ts';
import { UpstreamError, upstreamFailure, type UpstreamTarget } from './upstream.ts';

/**
 * The upstream connection of a tunnel the proxy runs itself (a WebSocket upgrade, a CONNECT):
 * TCP by Upstreams.dial, through the sandbox's proxy when it has one (never direct then), and
 * for `wrapTls` TLS verified as the pooled requests verify it (the same trust, the certificate
 * checked for the Host). Every tunnel's upstream is opened here. Resolves once bytes can flow;
 * rejects with the UpstreamError whose 502 or 504 the sandbox gets.
 */
export async function openTunnelUpstream(deps: ProxyDeps, sandboxIp: string, target: UpstreamTarget, wrapTls: boolean): Promise<Socket> {
  const settings = deps.upstreams.tunnelSettings();
  const started = Date.now();
  let raw: Socket;
  try {
    raw = await deps.upstreams.dial({ ip: target.ip, port: target.port }, deps.viaFor(sandboxIp));
  } catch (err) {
    throw tunnelFailure(err, target, settings.connectTimeoutMs);
  }
  // Nobody listens for errors on it until the caller takes it: one that came now must not throw.
  raw.on('error', (err) => deps.logger.debug({ err: err.message, host: target.host }, 'egress tunnel: the upstream connection failed'));
  if (!wrapTls) return raw;
  const remainingMs = Math.max(1, settings.connectTimeoutMs - (Date.now() - started));
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      socket: raw,
      // The name the certificate is checked for; SNI only for a name (RFC 6066 has none for an address).
      host: target.host,
      ...(isIpv4(target.host) ? {} : { servername: target.host }),
      ...(settings.secureContext ? { secureContext: settings.secureContext } : {}),
    });
    // The connect timeout covers the TLS handshake too, as for pooled requests.
    const timer = setTimeout(() => socket.destroy(connectTimeout(target, settings.connectTimeoutMs)), remainingMs);
    const onError = (err: Error) => {
      clearTimeout(timer);
      raw.destroy();
      reject(tunnelFailure(err, target, settings.connectTimeoutMs));
    };
    socket.once('error', onError);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      socket.off('error', onError);
      socket.on('error', (err) => deps.logger.debug({ err: err.message, host: target.host }, 'egress tunnel: the upstream TLS connection failed'));
      resolve(socket);
    });
  });
}

/** A failed dial or handshake as the sandbox's answer; a direct connect that timed out is the 504 of pooled requests. */
function tunnelFailure(err: unknown, target: UpstreamTarget, connectTimeoutMs: number): UpstreamError {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code === 'ETIMEDOUT' && !(err instanceof ProxyDialError) && !(err instanceof UpstreamError)) return connectTimeout(target, connectTimeoutMs);
  return upstreamFailure(err, target);
}

function connectTimeout(target: UpstreamTarget, ms: number): UpstreamError {
  return new UpstreamError(504, 'connect_timeout', `upstream ${target.host} (${target.ip}:${target.port}) did not complete the connection within ${seconds(ms)}`, 'ETIMEDOUT');
}

/** The idle timeout's answer before the upstream's head came, worded as for pooled requests. */
export function ioTimeout(target: UpstreamTarget, ms: number): UpstreamError {
  return new UpstreamError(504, 'io_timeout', `upstream ${target.host} (${target.ip}:${target.port}) sent and took nothing for ${seconds(ms)}`, 'ETIMEDOUT');
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;
