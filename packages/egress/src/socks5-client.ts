import type { Socket } from 'node:net';
import { ProxyDialError, type DialTarget, type ProxyVia } from './proxy-via.ts';
import { readExactly } from './socket-read.ts';

/** RFC 1928 reply codes, for the message the sandbox and the audit get. */
const REPLIES: Record<number, string> = {
  1: 'general failure', 2: 'connection not allowed by its rules', 3: 'network unreachable', 4: 'host unreachable',
  5: 'connection refused', 6: 'TTL expired', 7: 'command not supported', 8: 'address type not supported',
};

/**
 * The client side of a SOCKS5 CONNECT (RFC 1928) on a connected socket, with username/password
 * authentication (RFC 1929) when the proxy has credentials. The target is an IPv4 address the
 * egress proxy resolved itself (pinned: the SOCKS server cannot send it elsewhere by name).
 */
export async function socks5Handshake(socket: Socket, target: DialTarget, via: ProxyVia): Promise<void> {
  const auth = via.username !== undefined;
  socket.write(Buffer.from(auth ? [5, 2, 0, 2] : [5, 1, 0]));
  const [version, method] = await readExactly(socket, 2);
  if (version !== 5) throw new ProxyDialError(`${via.host}:${via.port} does not speak SOCKS5 (its first byte was ${version})`, 'EPROXYPROTO');
  if (method === 0xff) throw new ProxyDialError(`the SOCKS5 proxy ${via.host}:${via.port} accepts none of our authentication methods${auth ? '' : ' (it may need a username and password)'}`, 'EPROXYAUTH');
  if (method === 2) {
    if (!auth) throw new ProxyDialError(`the SOCKS5 proxy ${via.host}:${via.port} asked for a username and password, and none is set`, 'EPROXYAUTH');
    const user = Buffer.from(via.username ?? '');
    const pass = Buffer.from(via.password ?? '');
    socket.write(Buffer.concat([Buffer.from([1, user.length]), user, Buffer.from([pass.length]), pass]));
    const [, status] = await readExactly(socket, 2);
    if (status !== 0) throw new ProxyDialError(`the SOCKS5 proxy ${via.host}:${via.port} refused the username and password`, 'EPROXYAUTH');
  } else if (method !== 0) {
    throw new ProxyDialError(`the SOCKS5 proxy ${via.host}:${via.port} chose an authentication method we did not offer (${method})`, 'EPROXYPROTO');
  }
  socket.write(Buffer.from([5, 1, 0, 1, ...target.ip.split('.').map(Number), target.port >> 8, target.port & 0xff]));
  const head = await readExactly(socket, 4);
  if (head[0] !== 5) throw new ProxyDialError(`the SOCKS5 proxy ${via.host}:${via.port} answered the CONNECT with version ${head[0]}`, 'EPROXYPROTO');
  if (head[1] !== 0) {
    const why = REPLIES[head[1]] ?? `reply ${head[1]}`;
    throw new ProxyDialError(`the SOCKS5 proxy ${via.host}:${via.port} could not connect to ${target.ip}:${target.port}: ${why}`, head[1] === 5 ? 'ECONNREFUSED' : 'EPROXYREFUSED');
  }
  // The bound address that follows: IPv4, a name, or IPv6, then the port.
  const rest = head[3] === 1 ? 4 : head[3] === 4 ? 16 : head[3] === 3 ? (await readExactly(socket, 1))[0] : -1;
  if (rest < 0) throw new ProxyDialError(`the SOCKS5 proxy ${via.host}:${via.port} answered with an unknown address type ${head[3]}`, 'EPROXYPROTO');
  await readExactly(socket, rest + 2);
}
