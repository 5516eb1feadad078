/** The `svc` command tree. */
import { Command, CommanderError } from 'commander';
import { nodeCommand } from './commands/node.ts';
import { sandboxCommand } from './commands/sandbox.ts';
import { snapshotCommand } from './commands/snapshot.ts';
import { templateCommand } from './commands/template.ts';
import { keyCommand, teamCommand } from './commands/team.ts';
import { upCommand } from './commands/up-command.ts';
import { envCommand } from './commands/env.ts';
import { prepareCommand } from './commands/prepare.ts';
import { componentCommands } from './commands/components.ts';
import { volumeCommand } from './commands/volume.ts';
import { eventsCommand } from './commands/events.ts';
import { webhookCommand } from './commands/webhook.ts';
import { mcpCommand } from './commands/mcp.ts';
import { backupCommand, restoreCommand } from './commands/backup.ts';
import { EXIT_USAGE } from './errors.ts';

const VERSION = '0.1.0';

export function buildProgram(): Command {
  const program = new Command('svc')
    .description('svc: self-hosted, E2B-compatible sandboxes')
    .version(VERSION)
    .option('--json', 'print machine-readable JSON')
    .option('--api-url <url>', 'API gateway URL (default: SVC_API_URL, endpoint.json, http://127.0.0.1:3000)')
    .option('--api-key <key>', 'API key (default: SVC_API_KEY, endpoint.json)')
    .option('--sandbox-url <url>', 'data-plane URL (default: SVC_SANDBOX_URL, endpoint.json, http://127.0.0.1:3002)')
    .option('--data-dir <dir>', 'data directory (default: SVC_DATA_DIR or ~/.svc)');
  program.addCommand(upCommand());
  program.addCommand(envCommand());
  program.addCommand(prepareCommand());
  program.addCommand(backupCommand());
  program.addCommand(restoreCommand());
  for (const c of componentCommands()) program.addCommand(c);
  program.addCommand(sandboxCommand());
  program.addCommand(snapshotCommand());
  program.addCommand(templateCommand());
  program.addCommand(volumeCommand());
  program.addCommand(eventsCommand());
  program.addCommand(webhookCommand());
  program.addCommand(nodeCommand());
  program.addCommand(teamCommand());
  program.addCommand(keyCommand());
  program.addCommand(mcpCommand());
  configureAll(program);
  return program;
}

/** Errors from commander become one `svc:` line and an exception instead of process.exit. */
function configureAll(cmd: Command): void {
  cmd.exitOverride();
  cmd.configureOutput({
    outputError: (text, write) => write(`svc: ${text.replace(/^error: /, '')}`),
  });
  for (const sub of cmd.commands) configureAll(sub);
}

/** The exit code for an error commander threw (help and version are successes). */
export function commanderExitCode(err: CommanderError): number {
  if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return 0;
  return EXIT_USAGE;
}
