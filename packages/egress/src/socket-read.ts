import type { Socket } from 'node:net';

/**
 * Reads exactly n bytes from a socket in paused mode, leaving anything after them unread (a proxy
 * handshake's reply, before the tunnel's own bytes). Rejects when the socket ends first.
 */
export function readExactly(socket: Socket, n: number): Promise<Buffer> {
  return n === 0 ? Promise.resolve(Buffer.alloc(0)) : readChunk(socket, n);
}

/**
 * Reads up to the end of an HTTP head (CRLF CRLF), at most maxBytes, and puts back whatever came
 * after it. Rejects on a longer head or an early end.
 */
export async function readHttpHead(socket: Socket, maxBytes: number): Promise<string> {
  let got = Buffer.alloc(0);
  for (;;) {
    const chunk = await readChunk(socket);
    got = Buffer.concat([got, chunk]);
    const end = got.indexOf('\r\n\r\n');
    if (end >= 0) {
      if (end + 4 < got.length) socket.unshift(got.subarray(end + 4));
      return got.subarray(0, end).toString('latin1');
    }
    if (got.length > maxBytes) throw Object.assign(new Error(`the proxy's answer head passed ${maxBytes} bytes`), { code: 'EPROXYPROTO' });
  }
}

/** Exactly n bytes when n is given, else whatever is buffered; rejects when the socket ends first. */
function readChunk(socket: Socket, n?: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tryRead = () => {
      const chunk = socket.read(n) as Buffer | null;
      if (chunk === null) return;
      done();
      resolve(chunk);
    };
    const onEnd = () => { done(); reject(Object.assign(new Error('the proxy closed the connection during the handshake'), { code: 'EPROXYCLOSED' })); };
    const onError = (err: Error) => { done(); reject(err); };
    const done = () => {
      socket.off('readable', tryRead);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.off('error', onError);
    };
    socket.on('readable', tryRead);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
    socket.once('error', onError);
    tryRead();
  });
}
