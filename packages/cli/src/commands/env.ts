/**
 * `svc env`: the official SDK's settings for the platform `svc up` runs from this data directory,
 * as shell `export` lines (`eval "$(svc env)"`). `svc up` prints its API key only to a terminal
 * (a service's or a CI's log keeps what it is given); this is how a shell gets the key then.
 */
import { Command } from 'commander';
import { savedEndpoint } from '../endpoint.ts';
import { CliError } from '../errors.ts';
import { exportLines } from '../shell-lines.ts';

export function envCommand(): Command {
  return new Command('env')
    .description('print the official e2b SDK\'s settings (E2B_API_URL, E2B_API_KEY, ...) for the platform svc up runs from the data directory, as export lines: eval "$(svc env)"')
    .action((_flags: unknown, c: Command) => {
      const globals = c.optsWithGlobals() as { dataDir?: string; json?: boolean };
      const { path, file } = savedEndpoint(globals.dataDir);
      const lines = file.e2bEnv;
      if (!Array.isArray(lines) || lines.length === 0 || !lines.every((l) => typeof l === 'string' && /^[A-Z_][A-Z0-9_]*=/.test(l))) {
        throw new CliError(`no platform found in ${path}: start one with \`svc up\` (the same --data-dir), which writes it`);
      }
      if (globals.json) {
        process.stdout.write(JSON.stringify(Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]))) + '\n');
        return;
      }
      process.stdout.write(exportLines(lines).join('\n') + '\n');
    });
}
