import type { Log } from './kernel.ts';

/** The service's log: one JSON object a line on stdout. */
export function jsonLog(out: NodeJS.WritableStream = process.stdout): Log {
  return (level, message, fields = {}) => {
    out.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg: message, ...fields })}\n`);
  };
}
