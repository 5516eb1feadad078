import net from 'node:net';
import { socks5Handshake } from './socks5-client.ts';
import { httpConnectHandshake } from './http-connect-client.ts';
import { ProxyDialError, type DialTarget, type ProxyVia } from './proxy-via.ts';

export { ProxyDialError, type DialTarget, type ProxyVia };

export interface DialOptions {
  via?: ProxyVia;
  /** Covers the TCP connect and, through a proxy, its whole handshake. */
  connectTimeoutMs: number;
  /** Resolves the proxy's own host name at dial time (the egress proxy's overrides, then DNS). */
  resolveProxyHost?: (host: string) => Promise<string>;
  /** Why a sandbox's own proxy may not be dialled at the address its name gave (platform-guard.ts); undefined: it may. */
  refuseProxyAddress?: (ip: string, port: number) => string | undefined;
}

/**
 * A TCP connection to the target, direct or through `via`; resolves once bytes can flow to the
 * target. When `via` is given nothing ever goes direct: a proxy that is down, refuses, or does
 * not speak its protocol fails the dial.
 */
export async function dialUpstream(target: DialTarget, opts: DialOptions): Promise<net.Socket> {
  const deadline = Date.now() + opts.connectTimeoutMs;
  const via = opts.via;
  if (!via) return connectTcp(target.ip, target.port, opts.connectTimeoutMs);
  const where = `${via.kind === 'socks5' ? 'SOCKS5' : 'HTTP CONNECT'} proxy ${via.host}:${via.port}`;
  let proxyIp: string;
  try {
    proxyIp = net.isIPv4(via.host) || !opts.resolveProxyHost ? via.host : await opts.resolveProxyHost(via.host);
  } catch (err) {
    throw new ProxyDialError(`the ${where} does not resolve (${(err as Error).message})`, 'EPROXYDNS');
  }
  // Checked at each dial, not only at the create: a name may resolve elsewhere since (DNS rebinding).
  const refusal = via.fromSandbox ? opts.refuseProxyAddress?.(proxyIp, via.port) : undefined;
  if (refusal) throw new ProxyDialError(`the ${where} is refused: ${proxyIp} ${refusal}; it was not contacted`, 'EPROXYADDR');
  let socket: net.Socket;
  try {
    socket = await connectTcp(proxyIp, via.port, Math.max(1, deadline - Date.now()));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new ProxyDialError(`the ${where} cannot be reached (${e.code ?? e.message})`, e.code === 'ETIMEDOUT' ? 'ETIMEDOUT' : 'EPROXYDOWN');
  }
  const timer = setTimeout(() => socket.destroy(new ProxyDialError(`the ${where} did not open a tunnel to ${target.ip}:${target.port} in time`, 'ETIMEDOUT')), Math.max(1, deadline - Date.now()));
  try {
    if (via.kind === 'socks5') await socks5Handshake(socket, target, via);
    else await httpConnectHandshake(socket, target, via);
    return socket;
  } catch (err) {
    socket.destroy();
    if (err instanceof ProxyDialError) throw err;
    throw new ProxyDialError(`the ${where} failed: ${(err as Error).message}`, (err as NodeJS.ErrnoException).code ?? 'EPROXY');
  } finally {
    clearTimeout(timer);
  }
}

function connectTcp(ip: string, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: ip, port });
    const timer = setTimeout(() => socket.destroy(Object.assign(new Error(`connect to ${ip}:${port} timed out`), { code: 'ETIMEDOUT' })), timeoutMs);
    socket.once('connect', () => { clearTimeout(timer); socket.off('error', reject); resolve(socket); });
    socket.once('error', (err) => { clearTimeout(timer); reject(err); });
  });
}
