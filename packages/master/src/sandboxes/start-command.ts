import { SvcError, toSvcError, wrapError } from '@svc/common';
import type { NodeAgentClient } from '@svc/contracts/node-agent';

/** A built template's start command and the check that it is up (docs/templates.md, "The builder"). */
export interface StartCommand {
  command: string;
  readyCommand?: string;
  user: string;
  /** Absent: the user's home. */
  cwd?: string;
  envVars: Record<string, string>;
}

const READY_TIMEOUT_MS = 120_000;
const READY_EVERY_MS = 250;

/**
 * Starts the command in the background (its output goes to the sandbox's console, so to its
 * logs) and waits until the ready command exits 0. A ready command that never passes within
 * two minutes is a 504 naming its last output; `onOutput` sees what each check printed.
 */
export async function startAndWaitReady(node: Pick<NodeAgentClient, 'exec'>, sandboxId: string, s: StartCommand, onOutput: (line: string) => Promise<void> = async () => {}): Promise<void> {
  const exec = (command: string, timeoutMs: number) => node.exec(sandboxId, { command, user: s.user, ...(s.cwd ? { cwd: s.cwd } : {}), envVars: s.envVars, timeoutMs });
  // PID 1's stdout is the sandbox's console; the command outlives this shell. A microvm guest
  // keeps /proc/1 from other users, and gives everyone /dev/console instead (docs/runtimes.md).
  const pickConsole = 'out=/proc/1/fd/1; [ -w "$out" ] || out=/dev/console';
  const started = await exec(`${pickConsole}; nohup /bin/sh -c ${shellQuote(s.command)} </dev/null >"$out" 2>&1 &`, 30_000)
    .catch((err) => { throw wrapError(err, 'the start command could not be started', 502); });
  if (started.exitCode !== 0) throw new SvcError(502, `the start command could not be started (exit ${started.exitCode}): ${started.stderr.trim()}`);
  if (!s.readyCommand) return;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = '';
  for (;;) {
    // A ready command may take its time (E2B's waitForTimeout(ms) is a sleep): up to the deadline.
    const r = await exec(s.readyCommand, Math.max(1_000, deadline - Date.now()));
    if (r.exitCode === 0) return;
    const said = `${r.stdout}${r.stderr}`.trim();
    if (said && said !== last) await onOutput(said);
    last = said;
    if (Date.now() > deadline) {
      throw new SvcError(504, `the ready command did not pass within ${READY_TIMEOUT_MS / 1000} s (exit ${r.exitCode}${last ? `: ${last.split('\n').slice(-2).join(' | ')}` : ''})`);
    }
    await new Promise((res) => setTimeout(res, READY_EVERY_MS));
  }
}

export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
