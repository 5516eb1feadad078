import { appendFile, open, stat, truncate } from 'node:fs/promises';
import { formatSandboxLogLine, SandboxLogLines } from '@svc/contracts/sandbox-logs';

/** A line of the node agent's own in a sandbox's console file (its log: sandbox-logs.ts), stamped now. */
export async function appendAgentLine(consolePath: string, message: string): Promise<void> {
  await appendFile(consolePath, formatSandboxLogLine({ timestamp: new Date().toISOString(), level: 'info', message, fields: { logger: 'node-agent' } }), { mode: 0o600 });
}

/** The last `lines` entries of a console file as one line ('' when none): for errors and logs. */
export async function consoleTailOf(consolePath: string, lines = 5): Promise<string> {
  const text = await readTail(consolePath, 64 * 1024).catch(() => { /* nothing written yet (or the instance is gone): no entries */ return ''; });
  const entries = new SandboxLogLines();
  // A serial console (microvm) ends its lines with CR LF.
  return text.replace(/\r/g, '').trim().split('\n').slice(-lines).map((l) => entries.entry(l)?.message ?? l).join(' | ').slice(-2_000);
}

/** The last `bytes` of a file, as text: a console file may be tens of megabytes. */
async function readTail(path: string, bytes: number): Promise<string> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    const length = Math.min(size, bytes);
    const buf = Buffer.alloc(length);
    await file.read(buf, 0, length, size - length);
    return buf.toString('utf8');
  } finally {
    await file.close();
  }
}

/** The most a sandbox's console file may hold before it is cut (CONSOLE_MAX_BYTES). */
export const CONSOLE_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Cuts a console file past CONSOLE_MAX_BYTES back to nothing but a line saying so. A sandbox
 * writes its console at will (`cat /dev/zero > /proc/1/fd/1`), and the file is on the node's
 * disk, counted against no sandbox's: before 2026-11-30 one sandbox filled the node's disk for
 * every other team (found by a helper reading the node agent as an attacker). runsc and QEMU
 * write it in append mode, so they go on at its new end. Answers whether it was cut.
 */
export async function capConsoleFile(consolePath: string, maxBytes = CONSOLE_MAX_BYTES): Promise<boolean> {
  const st = await stat(consolePath).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined; // not booted yet, or gone: nothing to cut
    throw err;
  });
  if (!st || st.size <= maxBytes) return false;
  await truncate(consolePath, 0);
  await appendAgentLine(consolePath, `the console log passed ${Math.round(maxBytes / 1_048_576)} MiB and was cut: what came before is gone`);
  return true;
}
