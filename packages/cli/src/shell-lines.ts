/** Settings written as a POSIX shell reads them: `svc env`'s and `svc up`'s export lines. */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** A value quoted for a POSIX shell: single quotes, each inner one closed, escaped and reopened. */
function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:@%+,=-]*$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

/** `NAME=value` lines as `export NAME=value`, each value quoted for the shell. */
export function exportLines(lines: readonly string[]): string[] {
  return lines.map((line) => {
    const eq = line.indexOf('=');
    return `export ${line.slice(0, eq)}=${shellQuote(line.slice(eq + 1))}`;
  });
}

/** ` --data-dir DIR` for a command to print beside `svc`, or nothing for the default directory. */
export function dataDirFlag(dataDir: string): string {
  return resolve(dataDir) === join(homedir(), '.svc') ? '' : ` --data-dir ${shellQuote(resolve(dataDir))}`;
}
