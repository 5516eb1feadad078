import { createServer } from 'node:net';

/** A TCP port free on `host` now (tests: a server whose address must be known before it starts). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(0, host, resolve));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}
