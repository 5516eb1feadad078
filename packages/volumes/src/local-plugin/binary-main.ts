/**
 * The local plugin's program (bundled as dist/svc-volume-local.mjs):
 *
 *   svc-volume-local.mjs --op create|destroy|attach|detach ...   one hook, as a `binary` plugin:
 *       prints one JSON line and exits 0, or prints {"error": "..."} and exits 1
 *   svc-volume-local.mjs --serve-rpc --socket PATH [--exit-with-parent]   the `rpc` plugin, until SIGTERM/SIGINT (or its stdin ends)
 *
 * The volumes' data lives under $SVC_LOCAL_VOLUME_ROOT (default /data/svc-shared/volume-data).
 */
import { parseHookArgs, readFlags, type HookCall } from '../plugins/binary-flags.ts';
import { LocalVolumes } from './local-volumes.ts';
import { startLocalRpcServer } from './rpc-server.ts';

async function runHook(volumes: LocalVolumes, call: HookCall): Promise<object> {
  switch (call.op) {
    case 'create': {
      const out = await volumes.create(call.input);
      return { token: out.token, private_data: out.privateData };
    }
    case 'destroy':
      await volumes.destroy(call.input);
      return {};
    case 'attach': {
      const out = await volumes.attach(call.input);
      return { host_path: out.hostPath, metadata: out.metadata };
    }
    case 'detach':
      await volumes.detach(call.input);
      return {};
  }
}

async function serve(argv: string[]): Promise<void> {
  const withParent = argv.includes('--exit-with-parent');
  const socket = readFlags(argv.filter((a) => a !== '--serve-rpc' && a !== '--exit-with-parent')).get('socket');
  if (!socket) throw new Error('--serve-rpc needs --socket PATH');
  const volumes = new LocalVolumes();
  const server = await startLocalRpcServer({ socketPath: socket, volumes });
  process.stderr.write(`svc-volume-local: serving on unix:${socket.replace(/^unix:/, '')}, data under ${volumes.root}\n`);
  const stop = () => {
    server.close().then(
      () => process.exit(0),
      (err: Error) => {
        process.stderr.write(`svc-volume-local: closing: ${err.message}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  // Started by svc up: its end (however it ended, a SIGKILL too) closes this pipe, and this ends with it.
  if (withParent) process.stdin.on('end', stop).resume();
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--serve-rpc')) {
    try {
      await serve(argv);
    } catch (err) {
      process.stderr.write(`svc-volume-local: ${(err as Error).message}\n`);
      process.exit(1);
    }
    return;
  }
  try {
    const answer = await runHook(new LocalVolumes(), parseHookArgs(argv));
    process.stdout.write(`${JSON.stringify(answer)}\n`);
    process.exitCode = 0;
  } catch (err) {
    process.stdout.write(`${JSON.stringify({ error: err instanceof Error ? err.message : String(err) })}\n`);
    process.exitCode = 1;
  }
}

await main(process.argv.slice(2));
