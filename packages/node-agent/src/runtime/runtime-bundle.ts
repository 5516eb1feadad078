import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, cp, mkdir, readdir, readFile, rename, rm, writeFile, chmod } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SvcError } from '@svc/common';
import { CODE_INTERPRETER_BUNDLE } from '@svc/contracts/code-interpreter';
import { MCP_GATEWAY_DIR } from '@svc/contracts/mcp-gateway';
import { run } from '../host/exec.ts';

/**
 * The read-only directory injected into every sandbox at /.svc: the host's node binary with
 * its shared libraries and dynamic loader (so envd runs in any image, even one without libc),
 * dumb-init as PID 1, the envd bundle with its native pty module next to it, and the static
 * `svc-sudo` (sudo through envd where set-uid cannot work: packages/node-agent/native/sudo.c) and
 * the static `svc-spawner` that starts envd's processes (packages/envd/native/spawner.c), and the
 * code interpreter's bundle, which the code-interpreter-v1 template starts (packages/code-interpreter),
 * and the MCP gateway's directory (its bundle, its reference servers and its launcher), which the
 * mcp-gateway template links as /usr/local/bin/mcp-gateway (packages/mcp-gateway).
 *   /.svc/bin/node  /.svc/bin/dumb-init  /.svc/bin/svc-sudo  /.svc/bin/svc-spawner  /.svc/lib/ld-linux-x86-64.so.2 ...  /.svc/envd/envd.mjs
 *   /.svc/code-interpreter/code-interpreter.mjs
 *   /.svc/mcp-gateway/mcp-gateway  /.svc/mcp-gateway/mcp-gateway.mjs  /.svc/mcp-gateway/servers/*.mjs ...
 * PID 1 is dumb-init rather than tini because tini wakes every second to reap (sigtimedwait with
 * a 1 s timeout), and under gVisor's ptrace platform each wake costs an idle sandbox about
 * 0.05% of a core; dumb-init sleeps in sigwait until a signal comes (docs/decisions.md).
 */
export const SANDBOX_RUNTIME_DIR = '/.svc';

/** Where a sandbox finds svc's sudo (a static program: it runs in any image). */
export const SANDBOX_SUDO = `${SANDBOX_RUNTIME_DIR}/bin/svc-sudo`;

/** Where envd finds its spawner (static, packages/envd/native/spawner.c). */
export const SANDBOX_SPAWNER = `${SANDBOX_RUNTIME_DIR}/bin/svc-spawner`;

/** With it set to 1 in PID 1's environment, envd runs one command at boot (packages/envd/src/warm-up.ts): warm sandboxes have it. */
export const ENVD_WARM_UP_ENV = 'SVC_ENVD_WARMUP';

/** The host's init for sandboxes (Debian's dumb-init package). */
export const SANDBOX_INIT = '/usr/bin/dumb-init';

export interface RuntimeBundle {
  /** Host directory bind-mounted at /.svc. */
  dir: string;
  /** Command line of the sandbox's PID 1 (dumb-init → envd). */
  initArgs: string[];
}

export interface RuntimeBundleSource {
  envdBundle: string;
  nodeBinary: string;
  /** The init that reaps orphans and forwards signals (Debian's dumb-init, linked against libc). */
  init: string;
  /** dist/svc-stat-shim.so, preloaded into sandbox programs (see STAT_SHIM_PRELOAD). */
  statShim: string;
  /** dist/svc-sudo (see SANDBOX_SUDO). */
  sudo: string;
  /** dist/svc-spawner (see SANDBOX_SPAWNER). */
  spawner: string;
  /** dist/code-interpreter.mjs, at CODE_INTERPRETER_BUNDLE (the code-interpreter-v1 template starts it). */
  codeInterpreter: string;
  /** dist/mcp-gateway/, copied whole to MCP_GATEWAY_DIR (the mcp-gateway template runs its launcher). */
  mcpGateway: string;
  /** Directory holding @lydell/node-pty and its platform package. */
  ptyModulesDir?: string;
}

/** Where the envd bundle is by default: dist/envd.mjs of the checkout, or beside a bundled svc.mjs. */
export function defaultEnvdBundle(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [
    process.env.SVC_ENVD_BUNDLE,
    join(here, '../../../../dist/envd.mjs'),
    join(here, 'envd.mjs'),
  ];
  return candidates.find((p): p is string => !!p && existsSync(p));
}

/** A file scripts/build.mjs makes (the stat shim, svc-sudo, svc-spawner, the code interpreter, the MCP gateway's directory): beside the envd bundle, else the checkout's dist/. */
export function defaultNativeFile(envdBundle: string, name: 'svc-stat-shim.so' | 'svc-sudo' | 'svc-spawner' | 'code-interpreter.mjs' | 'mcp-gateway', override?: string): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [override, join(dirname(envdBundle), name), join(here, '../../../../dist', name), join(here, name)];
  return candidates.find((p): p is string => !!p && existsSync(p)) ?? join(dirname(envdBundle), name);
}

/**
 * `/etc/ld.so.preload` of every gVisor sandbox: the shim that drops AT_NO_AUTOMOUNT from statx and
 * fstatat, which this runsc refuses (packages/node-agent/native/stat-shim.c, docs/decisions.md).
 */
export const STAT_SHIM_PRELOAD = `${SANDBOX_RUNTIME_DIR}/lib/svc-stat-shim.so\n`;

/** node_modules directory that holds @lydell/node-pty, if installed. */
export function defaultPtyModulesDir(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('@lydell/node-pty/package.json');
    return dirname(dirname(dirname(pkg)));
  } catch {
    return undefined;
  }
}

function initArgs(): string[] {
  const d = SANDBOX_RUNTIME_DIR;
  const loader = [`${d}/lib/ld-linux-x86-64.so.2`, '--library-path', `${d}/lib`];
  return [...loader, `${d}/bin/dumb-init`, '--', ...loader, `${d}/bin/node`, `${d}/envd/envd.mjs`];
}

/** Assembles the runtime once per (node version, envd bundle) under `<stateDir>/runtime/`. */
export async function ensureRuntimeBundle(stateDir: string, src: RuntimeBundleSource): Promise<RuntimeBundle> {
  if (!existsSync(src.envdBundle)) throw new SvcError(503, `envd bundle ${src.envdBundle} not found (run npm run build)`);
  for (const file of [src.statShim, src.sudo, src.spawner, src.codeInterpreter, src.mcpGateway]) if (!existsSync(file)) throw new SvcError(503, `${file} not found (run npm run build)`);
  const envd = await readFile(src.envdBundle);
  const shim = await readFile(src.statShim);
  const sudo = await readFile(src.sudo);
  const spawner = await readFile(src.spawner);
  const codeInterpreter = await readFile(src.codeInterpreter);
  const key = createHash('sha256').update(process.version).update(src.nodeBinary).update(src.init).update(envd).update(shim).update(sudo).update(spawner)
    .update(codeInterpreter).update(await hashTree(src.mcpGateway)).digest('hex').slice(0, 12);
  const dir = join(stateDir, 'runtime', `node-${process.version}-${key}`);
  if (existsSync(join(dir, '.complete'))) return { dir, initArgs: initArgs() };

  const tmp = `${dir}.tmp-${randomBytes(4).toString('hex')}`;
  try {
    await mkdir(join(tmp, 'bin'), { recursive: true });
    await mkdir(join(tmp, 'lib'));
    await mkdir(join(tmp, 'envd'));
    await copyFile(src.nodeBinary, join(tmp, 'bin/node'));
    await copyFile(src.init, join(tmp, 'bin/dumb-init'));
    await chmod(join(tmp, 'bin/node'), 0o755);
    await chmod(join(tmp, 'bin/dumb-init'), 0o755);
    await writeFile(join(tmp, 'lib/svc-stat-shim.so'), shim, { mode: 0o755 });
    await writeFile(join(tmp, 'bin/svc-sudo'), sudo, { mode: 0o755 });
    await writeFile(join(tmp, 'bin/svc-spawner'), spawner, { mode: 0o755 });
    const ptyNative = src.ptyModulesDir ? join(src.ptyModulesDir, `@lydell/node-pty-linux-${process.arch}`, 'pty.node') : undefined;
    const libs = await sharedLibraries([src.nodeBinary, src.init, ...(ptyNative && existsSync(ptyNative) ? [ptyNative] : [])]);
    for (const lib of libs) await copyFile(lib, join(tmp, 'lib', basename(lib)));
    if (!libs.some((l) => basename(l) === 'ld-linux-x86-64.so.2')) throw new Error(`no ld-linux-x86-64.so.2 among ${src.nodeBinary}'s libraries`);
    await writeFile(join(tmp, 'envd/envd.mjs'), envd);
    const interpreterPath = join(tmp, CODE_INTERPRETER_BUNDLE.slice(SANDBOX_RUNTIME_DIR.length + 1));
    await mkdir(dirname(interpreterPath), { recursive: true });
    await writeFile(interpreterPath, codeInterpreter);
    if (existsSync(`${src.codeInterpreter}.map`)) await copyFile(`${src.codeInterpreter}.map`, `${interpreterPath}.map`);
    const gatewayDir = join(tmp, MCP_GATEWAY_DIR.slice(SANDBOX_RUNTIME_DIR.length + 1));
    await cp(src.mcpGateway, gatewayDir, { recursive: true, dereference: true });
    // The launcher must stay executable whatever the copy did with modes.
    await chmod(join(gatewayDir, 'mcp-gateway'), 0o755);
    if (existsSync(`${src.envdBundle}.map`)) await copyFile(`${src.envdBundle}.map`, join(tmp, 'envd/envd.mjs.map'));
    if (src.ptyModulesDir) {
      for (const name of ['node-pty', `node-pty-linux-${process.arch}`]) {
        const from = join(src.ptyModulesDir, '@lydell', name);
        if (existsSync(from)) await cp(from, join(tmp, 'envd/node_modules/@lydell', name), { recursive: true, dereference: true });
      }
    }
    await writeFile(join(tmp, '.complete'), `${new Date().toISOString()}\n`);
    await rename(tmp, dir).catch(async (err) => {
      // Another assembly finished first: use it.
      if (!existsSync(join(dir, '.complete'))) throw err;
    });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return { dir, initArgs: initArgs() };
}

/** A digest of a directory's files (names and contents), so that a rebuilt gateway makes a new runtime. */
async function hashTree(dir: string): Promise<string> {
  const hash = createHash('sha256');
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name)).sort();
  for (const file of files) hash.update(file.slice(dir.length)).update('\0').update(await readFile(file));
  return hash.digest('hex');
}

/** Absolute paths of every shared library (and the loader) the binaries need, per ldd. */
async function sharedLibraries(binaries: string[]): Promise<string[]> {
  const found = new Set<string>();
  for (const bin of binaries) {
    const { stdout } = await run('ldd', [bin]);
    for (const line of stdout.split('\n')) {
      const m = /=>\s+(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
      if (m) found.add(m[1]);
    }
  }
  return [...found];
}
