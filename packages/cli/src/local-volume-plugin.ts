import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostCommandEnv, type Logger } from '@svc/common';
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
export async function startLocalVolumePlugin(o: { socketPath: string; root: string; logger: Logger }): Promise<LocalVolumePlugin> {
  mkdirSync(dirname(o.socketPath), { recursive: true, mode: 0o700 });
  const bundle = pluginBundle();
  if (!bundle) {
    o.logger.warn({ socketPath: o.socketPath }, 'dist/svc-volume-local.mjs is missing (npm run build): the local volume plugin runs inside svc');
    return startLocalRpcServer({ socketPath: o.socketPath, volumes: new LocalVolumes({ root: o.root }) });
  }
  let child: ChildProcess | undefined;
  let closing = false;
  let restart: NodeJS.Timeout | undefined;
  const start = () => {
    rmSync(o.socketPath, { force: true });
    // Its stdin is a pipe from this process: when svc ends in any way, the plugin ends too.
    const c = spawn(process.execPath, [bundle, '--serve-rpc', '--socket', o.socketPath, '--exit-with-parent'], {
      env: { ...hostCommandEnv(), SVC_LOCAL_VOLUME_ROOT: o.root }, stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    c.stderr!.on('data', (d: Buffer) => { stderr = (stderr + d.toString()).slice(-4096); });
    c.on('exit', (code, signal) => {
      if (closing) return;
      o.logger.error({ code, signal, stderr: stderr.trim() }, 'the local volume plugin exited; starting it again');
      restart = setTimeout(start, RESTART_AFTER_MS);
    });
    child = c;
  };
  start();
  const deadline = Date.now() + READY_WAIT_MS;
  while (!existsSync(o.socketPath)) {
    if (Date.now() > deadline) throw new Error(`the local volume plugin did not listen on ${o.socketPath} within ${READY_WAIT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
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
