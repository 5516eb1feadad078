import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { NODE_BUNDLE } from '../../../../scripts/bundle-options.mjs';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
let bundle: Promise<string> | undefined;

/**
 * Bundles envd like `npm run build` does, into node_modules/.cache so that the external
 * node-pty resolves relative to the bundle exactly as it will inside a sandbox.
 */
export function envdBundle(): Promise<string> {
  bundle ??= (async () => {
    const dir = join(repoRoot, 'node_modules', '.cache', 'svc-envd-test', String(process.pid));
    mkdirSync(dir, { recursive: true });
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const outfile = join(dir, 'envd.mjs');
    await build({
      ...NODE_BUNDLE,
      entryPoints: [join(repoRoot, 'packages/envd/src/main.ts')],
      outfile,
      external: ['@lydell/node-pty', '@lydell/node-pty-*'],
    });
    return outfile;
  })();
  return bundle;
}

export interface RunningEnvd {
  url: string;
  port: number;
  pid: number;
  /** Everything envd printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/** The spawner `npm run build` compiles; envd starts its processes through it as in a sandbox. */
export const BUILT_SPAWNER = join(repoRoot, 'dist/svc-spawner');

/** Starts envd on a free loopback port with the given extra environment. */
/** Starts the built envd (with dist/svc-spawner when built; SVC_ENVD_SPAWNER '' for none); `init` is then POSTed to /init, as the node agent personalises every sandbox. */
export async function startEnvd(env: Record<string, string> = {}, init?: { accessToken?: string; envVars?: Record<string, string> }): Promise<RunningEnvd> {
  const file = await envdBundle();
  const child: ChildProcess = spawn(process.execPath, [file], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LANG: 'C.UTF-8',
      ENVD_PORT: '0',
      ENVD_HOST: '127.0.0.1',
      ENVD_METADATA_FILE: join(dirname(file), `metadata-${Date.now()}-${Math.random()}.json`),
      ...(existsSync(BUILT_SPAWNER) ? { SVC_ENVD_SPAWNER: BUILT_SPAWNER } : {}),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const port = await new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`envd did not start: ${output}`)), 20_000);
    child.stdout!.on('data', () => {
      const match = /listening on [^:]+:(\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolvePort(Number(match[1]));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`envd exited with ${code}: ${output}`));
    });
  });
  if (init) {
    const r = await fetch(`http://127.0.0.1:${port}/init`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(init) });
    if (r.status !== 204) throw new Error(`envd /init answered ${r.status}: ${await r.text()}`);
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
