/**
 * The root side of `sudo` where the runtime forbids set-uid programs (gVisor: docs/decisions.md,
 * "sudo under gVisor"). envd, which runs as root, listens on a unix socket that every user may
 * reach; each connection is handed, unread, to the helper program (`svc-sudo --serve`, on fd 0),
 * which checks the caller against the sudoers rules and runs the command on the caller's own
 * standard descriptors. envd reads nothing from the socket: the descriptors travel with the
 * first bytes (SCM_RIGHTS) and must reach the helper intact.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { dirname } from 'node:path';

const SUDO_SOCKET = '/run/svc-envd/sudo.sock';

/**
 * Connections served at once; more are closed as they come. Any local user may connect, sudoer
 * or not, and each connection is a root helper until it ends: without a cap, connections piled
 * up root processes. A connection is held for its command's whole life (the helper forwards its
 * signals and sends back its status), and envd, which reads nothing from it, cannot tell a
 * running command from a request still awaited: so the cap counts both, and is set well above
 * the long-running `sudo` commands a sandbox runs at once (16 was not: a 17th `sudo` waited
 * for one of them to end). What bounds the piling up of silent connections is svc-sudo's own
 * request deadline (30 s): a connection that has not sent its whole request by then is closed.
 */
export const MAX_SUDO_CONNECTIONS = 256;
/** Refused connections are told in the log at most this often, so that a flood of them is not a flood of lines. */
const REFUSAL_NOTE_MS = 10_000;

export interface SudoServiceOptions {
  /** Seconds svc-sudo waits for a connection's request (its default is 30); for tests. */
  requestTimeoutSeconds?: number;
  /** Connections served at once (MAX_SUDO_CONNECTIONS); for tests. */
  maxConnections?: number;
}

export function startSudoService(helper: string, socketPath = SUDO_SOCKET, log: (line: string) => void = console.error, options: SudoServiceOptions = {}): Server {
  mkdirSync(dirname(socketPath), { recursive: true, mode: 0o755 });
  chmodSync(dirname(socketPath), 0o755);
  rmSync(socketPath, { force: true });
  const env = options.requestTimeoutSeconds === undefined ? process.env : { ...process.env, SVC_SUDO_REQUEST_TIMEOUT_S: String(options.requestTimeoutSeconds) };
  const server = createServer({ pauseOnConnect: true }, (socket) => {
    const child = spawn(helper, ['--serve'], { stdio: [socket, 'ignore', 'pipe'], env });
    child.stderr.setEncoding('utf8').on('data', (text: string) => log(`envd: sudo helper: ${text.trimEnd()}`));
    child.on('error', (err) => { log(`envd: sudo helper ${helper} failed to start: ${err.message}`); socket.destroy(); });
    // The helper holds its own copy of the connection; envd's is closed once the helper is done,
    // which is also when it stops counting against the cap.
    child.on('exit', () => socket.destroy());
  });
  const maxConnections = options.maxConnections ?? MAX_SUDO_CONNECTIONS;
  server.maxConnections = maxConnections;
  let refused = 0;
  let lastNote = -Infinity;
  server.on('drop', () => {
    refused++;
    if (Date.now() - lastNote < REFUSAL_NOTE_MS) return;
    log(`envd: sudo service: ${maxConnections} connections are being served; refused ${refused} more since the last note`);
    lastNote = Date.now();
    refused = 0;
  });
  server.on('error', (err) => log(`envd: sudo service on ${socketPath}: ${err.message}`));
  server.listen(socketPath, () => chmodSync(socketPath, 0o666));
  return server;
}
