/**
 * envd's sudo service with the real helper (dist/svc-sudo, built by `npm run build`), on the
 * host: the socket, the hand-over of each connection, who may use it, what comes back. The same
 * inside a gVisor sandbox is in test/e2e/e2b-sdk/envd.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { MAX_SUDO_CONNECTIONS, startSudoService } from './sudo-service.ts';

const HELPER = join(import.meta.dirname, '../../../../dist/svc-sudo');

async function sudo(args: string[], opts: { socket: string; asUser?: string; input?: string; signalAfterMs?: number }) {
  const env = { ...process.env, SVC_SUDO_SOCKET: opts.socket };
  const child = opts.asUser
    ? spawn('setpriv', [`--reuid=${opts.asUser}`, '--regid=65534', '--clear-groups', HELPER, ...args], { env })
    : spawn(HELPER, args, { env });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  // A command that ends before reading its input closes the pipe first; that is no failure here.
  child.stdin.on('error', () => {});
  child.stdin.end(opts.input ?? '');
  if (opts.signalAfterMs) setTimeout(() => child.kill('SIGINT'), opts.signalAfterMs);
  const [code, signal] = await once(child, 'close') as [number | null, string | null];
  return { code, signal, stdout, stderr };
}

test('sudo through envd: root runs as anyone, the sudoers decide for others, status and signals come back', { skip: !existsSync(HELPER) || process.getuid?.() !== 0 ? 'needs root and dist/svc-sudo (npm run build)' : false }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-sudo-'));
  chmodSync(dir, 0o755);
  const socket = join(dir, 'run/sudo.sock');
  const server = startSudoService(HELPER, socket, () => {});
  try {
    await once(server, 'listening');
    assert.equal(statSync(socket).mode & 0o777, 0o666, 'every user may reach the socket');

    const asRoot = await sudo(['-u', 'nobody', 'id', '-un'], { socket });
    assert.deepEqual([asRoot.code, asRoot.stdout], [0, 'nobody\n']);
    const piped = await sudo(['-u', 'nobody', 'cat'], { socket, input: 'through stdin\n' });
    assert.equal(piped.stdout, 'through stdin\n', 'the command reads the caller\'s own stdin');
    assert.equal((await sudo(['sh', '-c', 'exit 9'], { socket })).code, 9);
    assert.equal((await sudo(['/no/such/program'], { socket })).code, 127);
    const env = await sudo(['GREETING=hi', 'sh', '-c', 'echo $GREETING $SUDO_USER $PATH'], { socket });
    assert.equal(env.stdout, 'hi root /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n');

    const refused = await sudo(['id'], { socket, asUser: 'nobody' });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /nobody is not in the sudoers file/);
    assert.equal(refused.stdout, '', 'nothing ran');

    const interrupted = await sudo(['sleep', '30'], { socket, signalAfterMs: 300 });
    assert.equal(interrupted.signal, 'SIGINT', 'the command got the signal and the client ends as it did');
    assert.match((await sudo([], { socket })).stderr, /usage: sudo/);
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('connections that send nothing are capped and end after the helper\'s deadline', { skip: !existsSync(HELPER) || process.getuid?.() !== 0 ? 'needs root and dist/svc-sudo (npm run build)' : false }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-sudo-'));
  chmodSync(dir, 0o755);
  const socket = join(dir, 'run/sudo.sock');
  const lines: string[] = [];
  const cap = 8;
  const server = startSudoService(HELPER, socket, (l) => lines.push(l), { requestTimeoutSeconds: 1, maxConnections: cap });
  const open: Socket[] = [];
  try {
    await once(server, 'listening');
    // How long until `s` closes (Infinity past 10 s: a failure, not a hang).
    const closed = (s: Socket) => new Promise<number>((resolve) => {
      const t0 = Date.now();
      const timer = setTimeout(() => resolve(Infinity), 10_000);
      s.once('close', () => { clearTimeout(timer); resolve(Date.now() - t0); });
    });
    for (let i = 0; i < cap; i++) {
      const s = connect(socket);
      s.on('error', () => {});
      await once(s, 'connect');
      open.push(s);
    }
    const ended = open.map(closed);
    // Each silent connection is a root helper blocked on it; one more is refused at once.
    while ((server as unknown as { _connections: number })._connections < cap) await new Promise((r) => setTimeout(r, 10));
    const extra = connect(socket);
    extra.on('error', () => {});
    open.push(extra);
    assert.ok((await closed(extra)) < 1_000, 'the connection past the cap was closed at once');
    assert.ok(lines.some((l) => /8 connections are being served; refused 1/.test(l)), lines.join('\n'));

    // The helpers give up on a request that does not come, and their places are free again.
    const waited = await Promise.all(ended);
    assert.ok(Math.max(...waited) < 5_000, `the silent connections were closed after ${Math.max(...waited)} ms`);
    assert.ok(lines.some((l) => /no complete request in time/.test(l)), lines.join('\n'));
    const asRoot = await sudo(['-u', 'nobody', 'id', '-un'], { socket });
    assert.deepEqual([asRoot.code, asRoot.stdout], [0, 'nobody\n']);
  } finally {
    for (const s of open) s.destroy();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('more than 16 long-running sudo commands run at once: a running command is not a pending request', { skip: !existsSync(HELPER) || process.getuid?.() !== 0 ? 'needs root and dist/svc-sudo (npm run build)' : false }, async () => {
  assert.ok(MAX_SUDO_CONNECTIONS >= 64);
  const dir = mkdtempSync(join(tmpdir(), 'svc-sudo-'));
  chmodSync(dir, 0o755);
  const socket = join(dir, 'run/sudo.sock');
  const lines: string[] = [];
  const server = startSudoService(HELPER, socket, (l) => lines.push(l));
  const commands = Array.from({ length: 24 }, () => spawn(HELPER, ['sh', '-c', 'echo up; exec sleep 60'], { env: { ...process.env, SVC_SUDO_SOCKET: socket } }));
  try {
    await once(server, 'listening');
    const outcomes = await Promise.all(commands.map((child) => new Promise<string>((resolve) => {
      let out = '';
      const timer = setTimeout(() => resolve(`no output in 10 s: ${out}`), 10_000);
      child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; if (out.includes('up\n')) { clearTimeout(timer); resolve('up'); } });
      child.stderr.setEncoding('utf8').on('data', (d: string) => { out += d; });
      child.on('close', (code) => { clearTimeout(timer); resolve(`ended (${code}) before running: ${out}`); });
    })));
    assert.deepEqual(outcomes.filter((o) => o !== 'up'), [], lines.join('\n'));
  } finally {
    for (const child of commands) child.kill('SIGKILL');
    await Promise.all(commands.map((child) => child.exitCode === null && child.signalCode === null ? once(child, 'close') : undefined));
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
