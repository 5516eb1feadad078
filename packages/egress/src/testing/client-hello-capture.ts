import net from 'node:net';
import tls from 'node:tls';

/** The first bytes node's TLS client sends (its ClientHello), caught by a server that then hangs up. */
export async function captureClientHello(servername: string | undefined): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const got = new Promise<Buffer>((resolve) => server.once('connection', (s) => s.once('data', (b: Buffer) => { resolve(b); s.destroy(); })));
  const client = tls.connect({ host: '127.0.0.1', port, ...(servername ? { servername } : {}) });
  client.on('error', () => { /* the capturing server hangs up on purpose */ });
  try {
    return await got;
  } finally {
    client.destroy();
    server.close();
  }
}
