/**
 * Fetching the servers that are not built in, into the state directory: catalog npm packages
 * (`npm install --prefix <state>/servers/<name>`), catalog PyPI packages (a venv there, pip), and
 * `github/<owner>/<repo>` repositories (`git clone` into <state>/github/<owner>/<repo>, then their
 * installCmd). Each is done once; all of them need the sandbox's internet, which a failure says.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { packageSpec, type CatalogServer } from './catalog.ts';
import { Tail, type Log } from './log.ts';

const INSTALL_TIMEOUT_MS = 10 * 60_000;

/** A server that could not be fetched or installed: the message names it. */
export class InstallError extends Error {}

async function runStep(server: string, what: string, command: string, args: string[], o: { cwd?: string; env?: NodeJS.ProcessEnv; log: Log; needsInternet: boolean }): Promise<void> {
  o.log(`[${server}] ${what}: ${command} ${args.join(' ')}`);
  const tail = new Tail(2000);
  const code = await new Promise<number | string>((resolve) => {
    const child = spawn(command, args, { cwd: o.cwd, env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'], timeout: INSTALL_TIMEOUT_MS });
    const take = (chunk: Buffer) => {
      tail.push(chunk.toString());
      for (const line of chunk.toString().split('\n')) if (line.trim()) o.log(`[${server}] ${line}`);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ENOENT' ? `${command} is not installed in this sandbox` : err.message));
    child.on('close', (status, signal) => resolve(status ?? `killed by ${signal}`));
  });
  if (code === 0) return;
  const why = typeof code === 'number' ? `exit code ${code}` : code;
  throw new InstallError(`MCP server '${server}': ${what} failed (${why})${o.needsInternet ? "; it needs the sandbox's internet access" : ''}${tail.toString() ? `:\n${tail}` : ''}`);
}

/** The npm package's entry (its `bin`), installed first if it is not. */
export async function ensureNpmServer(name: string, server: CatalogServer, stateDir: string, log: Log): Promise<string> {
  const dir = join(stateDir, 'servers', name);
  const pkgDir = join(dir, 'node_modules', server.package);
  const installed = await readFile(join(pkgDir, 'package.json'), 'utf8').then((t) => JSON.parse(t) as { version?: string }, (err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') log(`[${name}] reading its package.json: ${err.message}; installing it again`);
    return undefined;
  });
  if (!installed || (server.version && installed.version !== server.version)) {
    await mkdir(dir, { recursive: true });
    await runStep(name, `npm install ${packageSpec(server)}`, 'npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--omit=dev', '--no-package-lock', packageSpec(server)], { log, needsInternet: true });
  }
  const pkg = JSON.parse(await readFile(join(pkgDir, 'package.json'), 'utf8')) as { bin?: string | Record<string, string> };
  const bin = typeof pkg.bin === 'string' ? pkg.bin : pkg.bin?.[server.bin] ?? Object.values(pkg.bin ?? {})[0];
  if (!bin) throw new InstallError(`MCP server '${name}': ${server.package} has no program to run (no "bin" in its package.json)`);
  return join(pkgDir, bin);
}

/** The PyPI package's console script in its own venv, installed first if it is not. */
async function ensurePypiServer(name: string, server: CatalogServer, stateDir: string, log: Log): Promise<string> {
  const venv = join(stateDir, 'servers', name, 'venv');
  const program = join(venv, 'bin', server.bin);
  if (existsSync(program)) return program;
  await mkdir(dirname(venv), { recursive: true });
  if (!existsSync(join(venv, 'bin', 'pip'))) await runStep(name, 'creating its Python venv', 'python3', ['-m', 'venv', venv], { log, needsInternet: false });
  await runStep(name, `pip install ${packageSpec(server)}`, join(venv, 'bin', 'pip'), ['install', '--disable-pip-version-check', '--quiet', packageSpec(server)], { log, needsInternet: true });
  if (!existsSync(program)) throw new InstallError(`MCP server '${name}': ${server.package} installed no program '${server.bin}'`);
  return program;
}

/** The repository's checkout, cloned and its installCmd run first if they were not (a changed installCmd runs again). */
export async function ensureGithubRepo(spec: { name: string; owner: string; repo: string; installCmd?: string; env: Record<string, string> }, stateDir: string, log: Log): Promise<string> {
  const dir = join(stateDir, 'github', spec.owner, spec.repo);
  if (!existsSync(dir)) {
    const tmp = `${dir}.clone-${process.pid}`;
    await mkdir(dirname(dir), { recursive: true });
    await rm(tmp, { recursive: true, force: true });
    await runStep(spec.name, 'git clone', 'git', ['clone', '--depth', '1', `https://github.com/${spec.owner}/${spec.repo}`, tmp], { log, needsInternet: true });
    await rename(tmp, dir);
  }
  if (spec.installCmd) {
    const marker = join(dir, '.svc-mcp-installed');
    const done = await readFile(marker, 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') log(`[${spec.name}] reading ${marker}: ${err.message}`);
      return undefined;
    });
    if (done !== spec.installCmd) {
      await runStep(spec.name, 'its installCmd', '/bin/sh', ['-c', spec.installCmd], { cwd: dir, env: { ...process.env, ...spec.env }, log, needsInternet: true });
      await writeFile(marker, spec.installCmd);
    }
  }
  return dir;
}

/** A catalog server, installed if it is not: the npm package's entry (run on Node), or the PyPI package's program. */
export function ensureCatalogServer(name: string, server: CatalogServer, stateDir: string, log: Log): Promise<string> {
  return server.registry === 'npm' ? ensureNpmServer(name, server, stateDir, log) : ensurePypiServer(name, server, stateDir, log);
}
