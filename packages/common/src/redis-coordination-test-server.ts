/**
 * A throwaway redis-server on a free loopback port, for tests of Redis-backed coordination.
 * Nothing is persisted (`--save '' --appendonly no`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createConnection } from 'node:net';
import { freePort } from './free-port.ts';

export interface TestRedis {
  host: string;
  port: number;
  stop(): Promise<void>;
}

export const REDIS_SERVER_BIN = process.env.SVC_TEST_REDIS_SERVER ?? '/usr/bin/redis-server';

export async function startRedisServer(): Promise<TestRedis> {
  const host = '127.0.0.1';
  const port = await freePort(host);
  const child = spawn(REDIS_SERVER_BIN, [
    '--port', String(port), '--bind', host, '--save', '', '--appendonly', 'no',
    '--daemonize', 'no', '--protected-mode', 'yes', '--loglevel', 'warning',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => { stderr += d; });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitForPong(host, port, child, 5_000);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`redis-server did not start on ${host}:${port}: ${(err as Error).message} ${stderr}`);
  }
  return {
    host,
    port,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

async function waitForPong(host: string, port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}`);
    if (await ping(host, port)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('no PONG in time');
}

function ping(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ host, port });
    const done = (ok: boolean) => { sock.destroy(); resolve(ok); };
    sock.setTimeout(500, () => done(false));
    sock.once('error', () => done(false));
    sock.once('connect', () => sock.write('PING\r\n'));
    sock.once('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}
