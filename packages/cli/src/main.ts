/**
 * The `svc` entry point (bundled to dist/svc.mjs). Runs the command line, prints a failure
 * as one line on stderr, and exits with the command's code.
 */
import { CommanderError } from 'commander';
import { errorLine, exitCodeFor } from './errors.ts';
import { buildProgram, commanderExitCode } from './program.ts';
import { COMPONENT_NAMES } from './commands/components.ts';
import { runWorkerRole } from './worker-roles.ts';

/** Commands that keep serving after their action returns. */
const LONG_RUNNING = new Set(['up', ...COMPONENT_NAMES]);

export async function main(argv: string[]): Promise<{ code: number; keepRunning: boolean }> {
  const program = buildProgram();
  let invoked = '';
  program.hook('preAction', (_root, action) => { invoked = action.name(); });
  try {
    await program.parseAsync(argv, { from: 'user' });
    const code = typeof process.exitCode === 'number' ? process.exitCode : 0;
    return { code, keepRunning: code === 0 && LONG_RUNNING.has(invoked) };
  } catch (err) {
    if (err instanceof CommanderError) return { code: commanderExitCode(err), keepRunning: false };
    process.stderr.write(`${errorLine(err)}\n`);
    if (process.env.SVC_DEBUG) process.stderr.write(`${(err as Error)?.stack ?? ''}\n`);
    return { code: exitCodeFor(err), keepRunning: false };
  }
}

if (process.env.SVC_WORKER_ROLE) {
  // A proxy's worker process, forked by this program (worker-roles.ts): no command line.
  await runWorkerRole(process.env.SVC_WORKER_ROLE);
} else {
  const { code, keepRunning } = await main(process.argv.slice(2));
  process.exitCode = code;
  // Idle keep-alive sockets would otherwise hold a finished command open for seconds.
  if (!keepRunning) process.stdout.write('', () => process.exit(code));
}
