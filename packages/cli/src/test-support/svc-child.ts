/**
 * The `svc` CLI as a child process, for command tests: bundled once (a child of the bundle starts
 * in a fraction of tsx's time), run to its end, or started to be read while it runs (--follow).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';

export interface Run { code: number; stdout: string; stderr: string }

/** The CLI bundled into `dir`, without `svc up` and the components, which command tests never run. */
export async function bundleSvc(dir: string): Promise<string> {
  const outfile = join(dir, 'svc.mjs');
  await build({
    entryPoints: [resolve(import.meta.dirname, '../main.ts')], outfile, bundle: true, platform: 'node', target: 'node20', format: 'esm', logLevel: 'silent',
    banner: { js: "import { createRequire as __r } from 'node:module'; const require = __r(import.meta.url);" },
    plugins: [{
      name: 'leave-out-up',
      setup(b) {
        b.onResolve({ filter: /\/up\.ts$/ }, (a) => ({ path: resolve(a.resolveDir, a.path), external: true }));
        b.onResolve({ filter: /^@svc\/[a-z-]+\/component$/ }, (a) => ({ path: a.path, external: true }));
      },
    }],
  });
  return outfile;
}

/** Only what is given: no SVC_* of the environment the tests run in. */
const childEnv = (home: string, env: Record<string, string>): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: home, ...env });

export function runSvc(bundle: string, home: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((res) => {
    execFile(process.execPath, [bundle, ...args], { env: childEnv(home, env) }, (err, stdout, stderr) => {
      res({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

export interface RunningSvc {
  child: ChildProcess;
  /** What it has printed so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves when `cond` holds of its output; rejects after `ms`, or when it exits first. */
  until(cond: (stdout: string) => boolean, ms?: number): Promise<void>;
  exited: Promise<Run>;
}

export function startSvc(bundle: string, home: string, args: string[], env: Record<string, string>): RunningSvc {
  const child = spawn(process.execPath, [bundle, ...args], { env: childEnv(home, env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const exited = new Promise<Run>((res) => child.on('close', (code, signal) => res({ code: code ?? (signal ? 128 : 1), stdout: out, stderr: err })));
  let done = false;
  void exited.then(() => { done = true; });
  const until = async (cond: (stdout: string) => boolean, ms = 10_000) => {
    for (const deadline = Date.now() + ms; !cond(out);) {
      if (done) throw new Error(`svc exited before the output expected; stdout: ${out}; stderr: ${err}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for svc's output; stdout: ${out}; stderr: ${err}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  return { child, stdout: () => out, stderr: () => err, until, exited };
}
