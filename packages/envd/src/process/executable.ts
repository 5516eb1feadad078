import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { delimiter, resolve } from 'node:path';
import { ConnectError } from '../connect/code.ts';

/**
 * Finds the file a command names, like execvp would: a name with a slash is a path (relative to
 * the process's cwd), anything else is looked up in PATH. Failing here gives the client a clear
 * error instead of a process that dies at exec.
 */
export async function findExecutable(cmd: string, cwd: string, pathEnv: string | undefined): Promise<string> {
  if (cmd === '') throw new ConnectError('invalid_argument', 'process.cmd must not be empty');
  if (cmd.includes('\0')) throw new ConnectError('invalid_argument', 'process.cmd contains a NUL byte');
  if (cmd.includes('/')) {
    const file = resolve(cwd, cmd);
    const problem = await checkExecutable(file);
    if (problem === 'missing') throw new ConnectError('not_found', `executable '${cmd}' does not exist`);
    if (problem) throw new ConnectError('permission_denied', `'${cmd}' is ${problem}`);
    return file;
  }
  let sawNonExecutable: string | undefined;
  for (const dir of (pathEnv ?? '').split(delimiter)) {
    const file = resolve(cwd, dir || '.', cmd);
    const problem = await checkExecutable(file);
    if (!problem) return file;
    if (problem !== 'missing') sawNonExecutable ??= `${file} is ${problem}`;
  }
  if (sawNonExecutable) throw new ConnectError('permission_denied', `cannot execute '${cmd}': ${sawNonExecutable}`);
  throw new ConnectError('not_found', `executable '${cmd}' not found in PATH (${pathEnv ?? ''})`);
}

async function checkExecutable(file: string): Promise<undefined | 'missing' | 'a directory' | 'not executable'> {
  try {
    const info = await stat(file);
    if (info.isDirectory()) return 'a directory';
    await access(file, constants.X_OK);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : 'not executable';
  }
}
