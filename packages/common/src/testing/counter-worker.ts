/**
 * A worker for worker-pool.test.ts: holds a value it starts with and that calls change, and
 * serves it over HTTP on a port all workers share.
 */
import http from 'node:http';
import { listenShared, runWorker } from '../worker-runtime.ts';

runWorker(async (init, emit) => {
  const state = init as { value: number; port: number; failStart?: boolean };
  if (state.failStart) throw new Error('told to fail');
  let value = state.value;
  const server = http.createServer((_req, res) => res.end(JSON.stringify({ value, pid: process.pid })));
  const { port } = await listenShared(server, state.port, '127.0.0.1');
  emit({ started: process.pid });
  return {
    info: { port },
    async handle(body) {
      const b = body as { set?: number; slow?: number };
      if (b.slow) await new Promise((r) => setTimeout(r, b.slow));
      if (b.set !== undefined) value = b.set;
      return { value, pid: process.pid };
    },
    close: () => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }),
  };
});
