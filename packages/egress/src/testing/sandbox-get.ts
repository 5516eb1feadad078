import net from 'node:net';

/**
 * One plain-http GET through the egress proxy from a sandbox's address (a loopback alias such as
 * 127.0.0.2 stands for another sandbox), on its own client connection, marked `X-From: from`;
 * resolves to the answer's status line (empty when the proxy closed without one).
 */
export function sandboxGet(proxyPort: number, localAddress: string, host: string, from: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ port: proxyPort, host: '127.0.0.1', localAddress });
    let got = '';
    s.on('data', (b: Buffer) => { got += b.toString(); });
    s.on('error', () => resolve(got.split('\r\n')[0]!));
    s.on('close', () => resolve(got.split('\r\n')[0]!));
    s.write(`GET / HTTP/1.1\r\nHost: ${host}\r\nX-From: ${from}\r\nConnection: close\r\n\r\n`);
  });
}
