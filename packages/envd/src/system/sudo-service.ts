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

export function startSudoService(helper: string, socketPath = SUDO_SOCKET, log: (line: string) => void = console.error): Server {
  mkdirSync(dirname(socketPath), { recursive: true, mode: 0o755 });
  chmodSync(dirname(socketPath), 0o755);
  rmSync(socketPath, { force: true });
  const server = createServer({ pauseOnConnect: true }, (socket) => {
    const child = spawn(helper, ['--serve'], { stdio: [socket, 'ignore', 'pipe'] });
    child.stderr.setEncoding('utf8').on('data', (text: string) => log(`envd: sudo helper: ${text.trimEnd()}`));
    child.on('error', (err) => { log(`envd: sudo helper ${helper} failed to start: ${err.message}`); socket.destroy(); });
    // The helper holds its own copy of the connection; envd's is closed once the helper is done.
    child.on('exit', () => socket.destroy());
  });
  server.on('error', (err) => log(`envd: sudo service on ${socketPath}: ${err.message}`));
  server.listen(socketPath, () => chmodSync(socketPath, 0o666));
  return server;
}
