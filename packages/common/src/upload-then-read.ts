import { connect } from 'node:net';

/**
 * For tests: sends an HTTP/1.1 request on a raw connection that the client closes after it
 * (Connection: close), the body in 1 MiB parts 20 ms apart, and reads nothing until all of it
 * is sent, as a client that uploads first does. Resolves with the answer's status line, or
 * `error <code>` when the connection failed (a reset before the answer was read, say).
 */
export function uploadThenRead(o: { port: number; host?: string; method: string; path: string; headers: Record<string, string>; body: Buffer }): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect(o.port, o.host ?? '127.0.0.1');
    let got = '';
    sock.on('error', (err: NodeJS.ErrnoException) => resolve(`error ${err.code}`));
    sock.on('data', (d: Buffer) => { got += d.toString('latin1'); });
    sock.on('end', () => resolve(got.split('\r\n')[0]!));
    sock.pause();
    void (async () => {
      const head = Object.entries({ ...o.headers, Connection: 'close', 'Content-Length': String(o.body.length) }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      sock.write(`${o.method} ${o.path} HTTP/1.1\r\n${head}\r\n`);
      for (let at = 0; at < o.body.length; at += 1024 * 1024) {
        if (!sock.write(o.body.subarray(at, at + 1024 * 1024))) await new Promise((r) => sock.once('drain', r));
        await new Promise((r) => setTimeout(r, 20));
      }
      sock.resume();
    })();
  });
}
