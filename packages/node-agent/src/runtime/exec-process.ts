import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExecOptions } from './driver.ts';

interface OciProcess {
  user: { uid: number; gid: number };
  args: string[];
  env: string[];
  cwd: string;
  capabilities?: { bounding?: string[]; effective?: string[]; permitted?: string[]; inheritable?: string[] };
  [key: string]: unknown;
}

/**
 * The process a `runsc exec` runs, as an OCI process file (`runsc exec --process`) in the
 * sandbox's bundle (0600, in the instance's 0700 directory), not as flags: flags are in the
 * command line, which every local user of the node reads (`/proc/<pid>/cmdline`), and they
 * carried a create's env vars (an API key for the start command) and a build step's RUN text and
 * ENV values there for as long as the command ran (found by a helper reading the node agent as
 * an attacker). What `runsc exec` gave with flags: the container's environment with the given
 * variables over it, its working directory unless one is given, and, without `--cap`, the
 * container's capabilities to the first process whatever its user (runsc's exec.go; a child
 * after execve drops them as Linux does). A file that gave a user other than root none failed
 * the start command's redirect to /dev/console (2026-11-30, .ci/run). The caller removes the file.
 */
export async function writeExecProcess(bundleDir: string, argv: string[], opts: Pick<ExecOptions, 'user' | 'cwd' | 'env'>): Promise<string> {
  const spec = JSON.parse(await readFile(join(bundleDir, 'config.json'), 'utf8')) as { process: OciProcess };
  const base = spec.process;
  const env = new Map(base.env.map((e) => [e.slice(0, e.indexOf('=')), e]));
  for (const [k, v] of Object.entries(opts.env ?? {})) env.set(k, `${k}=${v}`);
  const user = opts.user ? { uid: Number(opts.user.uid), gid: Number(opts.user.gid) } : base.user;
  if (!Number.isInteger(user.uid) || !Number.isInteger(user.gid)) throw new Error(`exec as ${opts.user?.name}: uid ${opts.user?.uid} and gid ${opts.user?.gid} must be numbers`);
  const process: OciProcess = {
    ...base, terminal: false, args: argv, env: [...env.values()], cwd: opts.cwd ?? base.cwd, user,
    capabilities: base.capabilities,
  };
  const file = join(bundleDir, `exec-${randomBytes(8).toString('hex')}.json`);
  await writeFile(file, JSON.stringify(process), { mode: 0o600, flag: 'wx' });
  return file;
}
