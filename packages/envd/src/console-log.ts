/**
 * envd's stdout and stderr are the sandbox's console file on the node, which the node agent
 * serves as the sandbox's logs (GET /sandboxes/{id}/logs): every console call becomes one
 * timestamped entry a line, so each line keeps the time it was written.
 */
import { format } from 'node:util';
import type { LogLevel } from '@svc/contracts/node-agent';
import { formatSandboxLogLine } from '@svc/contracts/sandbox-logs';

export function consoleAsSandboxLog(out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): void {
  const writer = (stream: NodeJS.WritableStream, level: LogLevel) => (...args: unknown[]) => {
    stream.write(formatSandboxLogLine({ timestamp: new Date().toISOString(), level, message: format(...args), fields: { logger: 'envd' } }));
  };
  console.debug = writer(out, 'debug');
  console.log = writer(out, 'info');
  console.info = writer(out, 'info');
  console.warn = writer(err, 'warn');
  console.error = writer(err, 'error');
}
