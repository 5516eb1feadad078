import type { Socket } from 'node:net';
import { ProxyDialError, type DialTarget, type ProxyVia } from './proxy-via.ts';
import { readHttpHead } from './socket-read.ts';

const MAX_ANSWER_HEAD = 16 * 1024;

/** `CONNECT ip:port` to an HTTP proxy (an operator's corporate proxy), with Basic credentials when it has them. */
export async function httpConnectHandshake(socket: Socket, target: DialTarget, via: ProxyVia): Promise<void> {
  const authority = `${target.ip}:${target.port}`;
  const auth = via.username !== undefined ? `Proxy-Authorization: Basic ${Buffer.from(`${via.username}:${via.password ?? ''}`).toString('base64')}\r\n` : '';
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
  let head: string;
  try {
    head = await readHttpHead(socket, MAX_ANSWER_HEAD);
  } catch (err) {
    throw new ProxyDialError(`the HTTP proxy ${via.host}:${via.port} gave no answer to CONNECT (${(err as Error).message})`, 'EPROXYPROTO');
  }
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
  if (!m) throw new ProxyDialError(`${via.host}:${via.port} does not speak HTTP CONNECT`, 'EPROXYPROTO');
  const status = Number(m[1]);
  if (status === 407) throw new ProxyDialError(`the HTTP proxy ${via.host}:${via.port} refused the credentials (407)`, 'EPROXYAUTH');
  if (status < 200 || status > 299) throw new ProxyDialError(`the HTTP proxy ${via.host}:${via.port} answered CONNECT ${authority} with ${status}`, status === 502 || status === 503 ? 'ECONNREFUSED' : 'EPROXYREFUSED');
}
