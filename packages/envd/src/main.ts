import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { readConfig } from './config.ts';
import type { RequestHandler } from './server.ts';
import { MemoryGuard } from './system/memory-guard.ts';
import { ENVD_VERSION } from '@svc/contracts/envd-version';
import { consoleAsSandboxLog } from './console-log.ts';
import { Spawner } from './process/spawner.ts';
import { AfterRestore } from './system/after-restore.ts';

consoleAsSandboxLog();
const config = readConfig(process.env);
const metadataFile = process.env.ENVD_METADATA_FILE ?? '/run/svc-envd/file-metadata.json';
// Forks from envd are slow under gVisor; a small helper starts its processes (process/spawner.ts).
const spawner = process.env.SVC_ENVD_SPAWNER ? Spawner.start(process.env.SVC_ENVD_SPAWNER) : undefined;
// A microvm guest may be saved and restored: its renewal helper runs from the start (system/after-restore.ts).
const afterRestore = process.env.SVC_ENVD_AFTER_RESTORE === '1' && process.env.SVC_ENVD_SUDO ? AfterRestore.start(process.env.SVC_ENVD_SUDO) : undefined;

// Listening comes first; the services (protobuf descriptors, process and file handling) are
// set up right after, and the few requests that may arrive in between wait for them.
let handler: RequestHandler | undefined;
let loading: Promise<RequestHandler> | undefined;
function load(): Promise<RequestHandler> {
  loading ??= Promise.all([import('./server.ts'), import('./state.ts')]).then(([server, state]) => {
    handler = server.createRequestHandler(new state.EnvdState(config), { metadataFile, spawner, afterRestore, onMemoryPressure: () => guard?.alert() });
    return handler;
  });
  return loading;
}

const server = createServer({ requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 640_000 }, (req: IncomingMessage, res: ServerResponse) => {
  if (handler) return handler(req, res);
  load().then(
    (h) => h(req, res),
    (err: Error) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 503, message: `envd failed to start: ${err.message}` }));
    },
  );
});

server.on('error', (err) => {
  console.error(`envd: ${err.message}`);
  process.exit(1);
});
server.listen(config.port, config.host, () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  console.log(`envd ${ENVD_VERSION} listening on ${config.host}:${port} (${Math.round(performance.now())} ms after process start)`);
  setImmediate(() => {
    load().then(
      () => { if (process.env.SVC_ENVD_WARMUP === '1') void import('./warm-up.ts').then((m) => m.warmUp(port, (line) => console.log(line))); },
      (err: Error) => console.error(`envd: failed to load services: ${err.stack ?? err.message}`),
    );
  });
});

// The node agent asks for it where the runtime has no OOM killer inside the sandbox (gVisor).
const guard = process.env.SVC_ENVD_MEMORY_GUARD === '1' ? new MemoryGuard() : undefined;
guard?.start();

// Where set-uid programs cannot work (gVisor), sudo reaches root through envd.
if (process.env.SVC_ENVD_SUDO) {
  const helper = process.env.SVC_ENVD_SUDO;
  import('./system/sudo-service.ts').then(
    (m) => m.startSudoService(helper),
    (err: Error) => console.error(`envd: sudo service not started: ${err.message}`),
  );
}

// envd must outlive a bug in one request: log it and keep serving the sandbox.
process.on('uncaughtException', (err) => console.error(`envd: uncaught exception: ${err.stack ?? err.message}`));
process.on('unhandledRejection', (err) => console.error(`envd: unhandled rejection: ${(err as Error)?.stack ?? String(err)}`));

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    server.close();
    process.exit(0);
  });
}
