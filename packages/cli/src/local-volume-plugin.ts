import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, hostCommandEnv, systemDirectory, type Logger, type SvcConfig } from '@svc/common';
import { LocalVolumes, startLocalRpcServer } from '@svc/volumes';

export interface LocalVolumePlugin { close(): Promise<void> }

const READY_WAIT_MS = 10_000;
const RESTART_AFTER_MS = 1_000;

/** dist/svc-volume-local.mjs: beside the bundled CLI, or in the checkout's dist/ when run from source. */
function pluginBundle(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  return [join(here, 'svc-volume-local.mjs'), join(here, '../../../dist/svc-volume-local.mjs')].find((p) => existsSync(p));
}

/**
 * The built-in `local` volume plugin as `svc up` runs it: its gRPC service in a small process of
 * its own (docs/volume-plugins.md), restarted if it dies. Its own process because the plugin runs
 * mount(8) for every first attach on the node, and a fork of this large process costs tens of
 * milliseconds where a small one's costs a few. Without the bundle (no `npm run build`), the
 * service runs in this process.
 */
export interface LocalVolumePluginOptions {
  socketPath: string;
  root: string;
  logger: Logger;
  /** How node runs the plugin's program: the bundle (default), or its source under tsx in tests. */
  program?: string[];
}

export async function startLocalVolumePlugin(o: LocalVolumePluginOptions): Promise<LocalVolumePlugin> {
  mkdirSync(dirname(o.socketPath), { recursive: true, mode: 0o700 });
  const bundle = o.program ?? [pluginBundle()].filter((b): b is string => b !== undefined);
  if (bundle.length === 0) {
    o.logger.warn({ socketPath: o.socketPath }, 'dist/svc-volume-local.mjs is missing (npm run build): the local volume plugin runs inside svc');
    return startLocalRpcServer({ socketPath: o.socketPath, volumes: new LocalVolumes({ root: o.root }) });
  }
  let child: ChildProcess | undefined;
  let closing = false;
  let restart: NodeJS.Timeout | undefined;
  let ready!: () => void;
  let failed!: (err: Error) => void;
  const listening = new Promise<void>((res, rej) => { ready = res; failed = rej; });
  const start = () => {
    // The socket is the plugin's to replace: it removes one left by a plugin that is gone and
    // refuses one something still answers on (rpc-server.ts). Removing it from here once cut off
    // the plugin of another svc up on the same data directory.
    // Its stdin is a pipe from this process: when svc ends in any way, the plugin ends too.
    const c = spawn(process.execPath, [...bundle, '--serve-rpc', '--socket', o.socketPath, '--exit-with-parent'], {
      env: { ...hostCommandEnv(), SVC_LOCAL_VOLUME_ROOT: o.root }, stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    c.stderr!.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4096);
      // binary-main.ts says so once the socket is bound: a socket file alone may be a stale one.
      if (stderr.includes('svc-volume-local: serving on')) ready();
    });
    c.on('exit', (code, signal) => {
      if (closing) return;
      failed(new Error(`the local volume plugin exited (${signal ?? `code ${code}`}) before it listened on ${o.socketPath}: ${stderr.trim()}`));
      o.logger.error({ code, signal, stderr: stderr.trim() }, 'the local volume plugin exited; starting it again');
      restart = setTimeout(start, RESTART_AFTER_MS);
    });
    child = c;
  };
  start();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([listening, new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error(`the local volume plugin did not listen on ${o.socketPath} within ${READY_WAIT_MS / 1000} s`)), READY_WAIT_MS);
    })]);
  } catch (err) {
    closing = true;
    clearTimeout(restart);
    child?.kill('SIGKILL');
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return {
    async close() {
      closing = true;
      clearTimeout(restart);
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      const timer = setTimeout(() => c.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * Volumes out of the box: with no volume_plugins configured, the built-in directory-backed
 * `local` plugin (docs/volume-plugins.md) over gRPC on a Unix socket in the data directory, its
 * data under <data_dir>/volumes unless SVC_LOCAL_VOLUME_ROOT says otherwise. Returns what starts it.
 * A root that is one of the system's directories is a ConfigError: the plugin makes its root 0700.
 */
/** Where the built-in `local` plugin keeps volumes' data (svc backup and restore copy it too). */
export function localVolumeRoot(cfg: Pick<SvcConfig, 'data_dir'>, env: NodeJS.ProcessEnv = process.env): string {
  return env.SVC_LOCAL_VOLUME_ROOT || join(cfg.data_dir, 'volumes');
}

export function useBuiltInVolumePlugin(cfg: SvcConfig, env: NodeJS.ProcessEnv = process.env): ((logger: Logger) => Promise<LocalVolumePlugin>) | undefined {
  if (cfg.master.volume_plugins.length > 0 || cfg.node_agent.volume_plugins.length > 0) return undefined;
  const root = localVolumeRoot(cfg, env);
  if (!isAbsolute(root)) throw new ConfigError('SVC_LOCAL_VOLUME_ROOT', `must be an absolute path (got ${JSON.stringify(root)})`);
  const system = systemDirectory(root);
  if (system !== undefined) throw new ConfigError('SVC_LOCAL_VOLUME_ROOT', `must be a directory of its own, not the system's ${system}: the local volume plugin makes it 0700`);
  const socketPath = join(cfg.data_dir, 'run', 'volume-local.sock');
  cfg.master.volume_plugins = [{ name: 'local', type: 'rpc', socket_path: socketPath }];
  cfg.node_agent.volume_plugins = cfg.master.volume_plugins;
  return (logger) => startLocalVolumePlugin({ socketPath, root, logger });
}
