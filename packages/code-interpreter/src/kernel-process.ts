/**
 * What the kernels share about their child processes: each runs in a process group of its own,
 * so an interrupt reaches the programs it started too, and shutting down ends them all.
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Log } from './kernel.ts';

/** Sends a signal to the child's whole process group; false when there is none any more. */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): boolean {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return false;
  return killGroup(child.pid, signal);
}

function killGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch (err) {
    // ESRCH: nothing is left in the group; whoever waits for the child hears of its exit.
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

const stopping = new WeakSet<ChildProcess>();

/** Ends the group: SIGTERM, then SIGKILL after `graceMs`; resolves once the child has exited. */
export async function stopGroup(child: ChildProcess, graceMs = 1_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  stopping.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  signalGroup(child, 'SIGTERM');
  const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  // Programs the kernel started may outlive it in its group.
  if (child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
}

/** How a child's exit is logged: a warning unless we ended it. */
export function logExit(child: ChildProcess, log: Log, what: string, code: number | null, signal: NodeJS.Signals | null): void {
  if (stopping.has(child)) log('info', `${what} stopped`, { pid: child.pid });
  else log('warn', `${what} ended`, { pid: child.pid, code, signal });
}

/** The child's own stdout and stderr lines (not the user's output) go to the service log. */
export function logChildOutput(child: ChildProcess, log: Log, fields: Record<string, unknown>): void {
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on('line', (line) => {
      if (line.trim()) log('info', `kernel: ${line}`, fields);
    });
  }
}
