/**
 * Reads a sandbox's console file (its PID 1's stdout and stderr: envd's lines, the agent's boot
 * marks) as its log, for GET /v1/sandboxes/:id/logs. The file grows with the sandbox and is
 * read in chunks from the start: what is held at once is one chunk, one line of at most
 * SANDBOX_LOG_LIMITS.lineMaxBytes and the `limit` entries picked so far.
 */
import { open } from 'node:fs/promises';
import type { SandboxLogEntry } from '@svc/contracts/node-agent';
import { SANDBOX_LOG_LIMITS, SandboxLogLines, SandboxLogPicker, type SandboxLogSelection } from '@svc/contracts/sandbox-logs';

const CHUNK_BYTES = 64 * 1024;
const NEWLINE = 0x0a;

export async function readConsoleLog(path: string, q: SandboxLogSelection): Promise<SandboxLogEntry[]> {
  const picker = new SandboxLogPicker(q);
  const lines = new SandboxLogLines();
  const file = await open(path, 'r').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined; // not booted yet: nothing written
    throw err;
  });
  if (!file) return [];
  try {
    // What was written up to now; a line still being written (no newline yet) waits for the next read.
    const { size } = await file.stat();
    const chunk = Buffer.alloc(CHUNK_BYTES);
    let line: Buffer[] = [];
    let lineBytes = 0;
    for (let pos = 0; pos < size;) {
      const { bytesRead } = await file.read(chunk, 0, Math.min(CHUNK_BYTES, size - pos), pos);
      if (bytesRead === 0) break;
      pos += bytesRead;
      const data = chunk.subarray(0, bytesRead);
      let from = 0;
      for (let nl = data.indexOf(NEWLINE); ; nl = data.indexOf(NEWLINE, from)) {
        const piece = data.subarray(from, nl === -1 ? data.length : nl);
        const room = SANDBOX_LOG_LIMITS.lineMaxBytes - lineBytes;
        if (room > 0 && piece.length > 0) {
          // A copy: the chunk's buffer is read into again.
          line.push(Buffer.from(piece.subarray(0, room)));
          lineBytes += Math.min(room, piece.length);
        }
        if (nl === -1) break;
        const entry = lines.entry(Buffer.concat(line, lineBytes).toString('utf8'));
        if (entry && !picker.offer(entry)) return picker.answer();
        line = [];
        lineBytes = 0;
        from = nl + 1;
      }
    }
    return picker.answer();
  } finally {
    await file.close();
  }
}
