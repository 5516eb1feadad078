import { appendFile, readFile } from 'node:fs/promises';
import { formatSandboxLogLine, SandboxLogLines } from '@svc/contracts/sandbox-logs';

/** A line of the node agent's own in a sandbox's console file (its log: sandbox-logs.ts), stamped now. */
export async function appendAgentLine(consolePath: string, message: string): Promise<void> {
  await appendFile(consolePath, formatSandboxLogLine({ timestamp: new Date().toISOString(), level: 'info', message, fields: { logger: 'node-agent' } }), { mode: 0o600 });
}

/** The last `lines` entries of a console file as one line ('' when none): for errors and logs. */
export async function consoleTailOf(consolePath: string, lines = 5): Promise<string> {
  const text = await readFile(consolePath, 'utf8').catch(() => { /* nothing written yet (or the instance is gone): no entries */ return ''; });
  const entries = new SandboxLogLines();
  // A serial console (microvm) ends its lines with CR LF.
  return text.replace(/\r/g, '').trim().split('\n').slice(-lines).map((l) => entries.entry(l)?.message ?? l).join(' | ').slice(-2_000);
}
