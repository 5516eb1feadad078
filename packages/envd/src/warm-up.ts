/**
 * A sandbox kept warm for hand-out runs one command through its own envd before anyone asks:
 * `bash --noprofile --norc -c true` as the default user, by the same Process.Start request the
 * SDK sends. Under gVisor the first command of a sandbox is about 60 ms slower than the next (the
 * sentry reads bash and its libraries from the host once; envd's request path is compiled once),
 * and a pooled sandbox is there to make a user's first command fast (docs/decisions.md, "First
 * command"). Set by the node agent for warm-pool sandboxes only: the memory it costs is paid by a
 * few sandboxes, not by every idle one.
 *
 * No login files: `bash -l` ran the template's /etc/profile and ~/.profile in a sandbox no create
 * had asked for yet, counted in no team's quota (found by a helper reading the node agent as an
 * attacker). The template's own code waits for the user's first command; those are shell
 * scripts, read by the bash this warms.
 *
 * A microvm template guest (SVC_ENVD_AFTER_RESTORE) is saved after its warm-up, and every clone
 * renews its clock and random pool first thing (system/after-restore.ts): the warm-up renews them
 * once too, with the guest's own time and randomness (a no-op), so that V8 compiles that request
 * path before the save instead of in every clone (under TCG 85 ms a clone, docs/runtimes.md).
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';

/** One request to envd, its answer read to the end; a failure is said and resolves (it costs only speed). */
function send(port: number, path: string, headers: Record<string, string>, body: Buffer, log: (line: string) => void): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
      res.on('error', (err) => { log(`envd: warm-up answer to ${path} broke off: ${err.message}`); resolve(undefined); });
    });
    req.on('error', (err) => { log(`envd: warm-up request ${path} failed: ${err.message}`); resolve(undefined); });
    req.end(body);
  });
}

/** bash's arguments: no login or rc files (see above). */
const WARM_UP_ARGS = ['--noprofile', '--norc', '-c', 'true'];

export async function warmUp(port: number, log: (line: string) => void = console.error): Promise<void> {
  const body = Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: WARM_UP_ARGS } }));
  const envelope = Buffer.alloc(5);
  envelope.writeUInt32BE(body.length, 1);
  const started = performance.now();
  const status = await send(port, '/process.Process/Start', { 'content-type': 'application/connect+json', 'connect-protocol-version': '1' }, Buffer.concat([envelope, body]), log);
  if (process.env.SVC_ENVD_AFTER_RESTORE === '1') {
    const renewal = Buffer.from(JSON.stringify({ timeMs: Date.now(), seed: randomBytes(32).toString('hex') }));
    const renewed = await send(port, '/svc/after-restore', { 'content-type': 'application/json' }, renewal, log);
    if (renewed !== 204) log(`envd: warm-up renewal answered ${renewed ?? 'nothing'}`);
  }
  if (status !== undefined) log(`envd: warm-up command done in ${Math.round(performance.now() - started)} ms (HTTP ${status})`);
}
