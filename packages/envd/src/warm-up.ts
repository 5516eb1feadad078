/**
 * A sandbox kept warm for hand-out runs one command through its own envd before anyone asks:
 * `bash -l -c true` as the default user, by the same Process.Start request the SDK sends. Under
 * gVisor the first command of a sandbox is about 60 ms slower than the next (the sentry reads
 * bash, its libraries and the login files from the host once; envd's request path is compiled
 * once), and a pooled sandbox is there to make a user's first command fast (docs/decisions.md,
 * "First command"). Set by the node agent for warm-pool sandboxes only: the memory it costs is
 * paid by a few sandboxes, not by every idle one.
 */
import { request } from 'node:http';

export function warmUp(port: number, log: (line: string) => void = console.error): Promise<void> {
  const body = Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'true'] } }));
  const envelope = Buffer.alloc(5);
  envelope.writeUInt32BE(body.length, 1);
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request({
      host: '127.0.0.1', port, method: 'POST', path: '/process.Process/Start',
      headers: { 'content-type': 'application/connect+json', 'connect-protocol-version': '1' },
    }, (res) => {
      res.resume();
      res.on('end', () => { log(`envd: warm-up command done in ${Math.round(performance.now() - started)} ms (HTTP ${res.statusCode})`); resolve(); });
      res.on('error', (err) => { log(`envd: warm-up answer broke off: ${err.message}`); resolve(); });
    });
    // A failed warm-up costs only speed: say so and go on.
    req.on('error', (err) => { log(`envd: warm-up request failed: ${err.message}`); resolve(); });
    req.end(Buffer.concat([envelope, body]));
  });
}
