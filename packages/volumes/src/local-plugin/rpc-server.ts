/**
 * The local plugin as an `rpc` plugin: both services of proto/volume_plugin.proto on a Unix
 * socket (mode 0600: only root, which runs the master and the node agent, may call it).
 */
import { chmod, lstat, unlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { Server, ServerCredentials, status, type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { volumeProto } from '../plugins/proto.ts';
import { LocalVolumeError, type LocalVolumes } from './local-volumes.ts';

export interface LocalRpcServerOptions {
  /** A filesystem path (a `unix:` prefix is accepted and dropped). */
  socketPath: string;
  volumes: LocalVolumes;
}

export interface LocalRpcServer {
  /** Stops taking calls, lets running ones finish (a few seconds at most) and removes the socket. */
  close(): Promise<void>;
}

const SHUTDOWN_GRACE_MS = 5_000;

type Request = Record<string, unknown>;

export async function startLocalRpcServer(opts: LocalRpcServerOptions): Promise<LocalRpcServer> {
  const socketPath = opts.socketPath.replace(/^unix:/, '');
  const { volumes } = opts;
  // At start, so that a root left 0755 is closed before the first hook, not at it. A failure is
  // the hooks' to report (each tries again), not a reason to refuse to serve.
  await volumes.prepareRoot().catch((err: Error) => process.stderr.write(`svc-volume-local: the volume data root ${volumes.root} could not be prepared: ${err.message}\n`));
  await removeStaleSocket(socketPath);

  const server = new Server();
  const proto = volumeProto();
  server.addService(proto.controller, {
    Create: handler(async (r) => {
      const out = await volumes.create({ volumeId: str(r.volume_id), name: str(r.name) });
      return { token: out.token, private_data: out.privateData };
    }),
    Destroy: handler(async (r) => {
      await volumes.destroy({ volumeId: str(r.volume_id) });
      return {};
    }),
  });
  server.addService(proto.node, {
    Attach: handler(async (r) => {
      const out = await volumes.attach({
        sandboxId: str(r.sandbox_id),
        namespace: str(r.namespace),
        volumeId: str(r.volume_id),
        refCount: Number(r.ref_count ?? 0),
        volumeBaseDir: str(r.volume_base_dir),
        privateData: str(r.private_data),
      });
      return { host_path: out.hostPath, metadata: out.metadata };
    }),
    Detach: handler(async (r) => {
      await volumes.detach({
        sandboxId: str(r.sandbox_id),
        namespace: str(r.namespace),
        volumeId: str(r.volume_id),
        refCount: Number(r.ref_count ?? 0),
        metadata: (r.metadata ?? {}) as Record<string, string>,
      });
      return {};
    }),
  });

  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix:${socketPath}`, ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
  });
  let ours: { dev: number; ino: number };
  try {
    await chmod(socketPath, 0o600);
    ours = await lstat(socketPath);
  } catch (err) {
    server.forceShutdown();
    throw err;
  }

  let closed: Promise<void> | undefined;
  return {
    close() {
      closed ??= (async () => {
        await new Promise<void>((resolve) => {
          const force = setTimeout(() => {
            server.forceShutdown();
            resolve();
          }, SHUTDOWN_GRACE_MS);
          server.tryShutdown(() => {
            clearTimeout(force);
            resolve();
          });
        });
        // Only the socket this server bound: one at the name now is another server's.
        const now = await lstat(socketPath).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return undefined; // already gone: nothing to remove
          throw err;
        });
        if (now?.dev === ours.dev && now.ino === ours.ino) {
          await unlink(socketPath).catch((err: NodeJS.ErrnoException) => {
            if (err.code !== 'ENOENT') throw err;
          });
        }
      })();
      return closed;
    },
  };
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** A unary handler that answers what `fn` returns, or the gRPC status of what it throws. */
function handler(fn: (request: Request) => Promise<object>): UntypedServiceImplementation[string] {
  return (call: ServerUnaryCall<Request, object>, callback: sendUnaryData<object>) => {
    fn(call.request).then(
      (answer) => callback(null, answer),
      (err: unknown) => callback({ code: statusOf(err), details: err instanceof Error ? err.message : String(err) }),
    );
  };
}

function statusOf(err: unknown): status {
  if (!(err instanceof LocalVolumeError)) return status.INTERNAL;
  if (err.kind === 'invalid') return status.INVALID_ARGUMENT;
  if (err.kind === 'not_found') return status.NOT_FOUND;
  return status.INTERNAL;
}

/**
 * A socket file left by a server that is gone would make the bind fail with EADDRINUSE, so it is
 * removed; one something still answers on is another plugin's (a second `svc up` on the same data
 * directory once removed the first's and left it unreachable), and is refused.
 */
async function removeStaleSocket(socketPath: string): Promise<void> {
  const st = await lstat(socketPath).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!st) return;
  if (!st.isSocket()) throw new Error(`${socketPath} exists and is not a socket; not removing it`);
  if (await answers(socketPath)) throw new Error(`${socketPath} is in use: another local volume plugin serves on it (is another svc up running on this data directory?); not removing it`);
  await unlink(socketPath);
}

/** Whether a server accepts connections on the socket: refused (or gone) means none does. */
function answers(socketPath: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const c = connect(socketPath);
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED' || err.code === 'ENOENT') resolve(false);
      else reject(new Error(`${socketPath}: cannot tell whether a server answers on it (${err.message}); not removing it`));
    });
  });
}
