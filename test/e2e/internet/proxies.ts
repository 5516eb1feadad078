/**
 * Real proxies in "the internet" namespace of internet.ts, each on an address of its own so the
 * upstream can tell what came through which: Debian's dante (SOCKS5, username/password, checked
 * against a system user) and squid (HTTP CONNECT).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const NETNS = 'svc-e2e-inet';
export const SOCKS_ADDRESS = '10.203.0.5';
export const SQUID_ADDRESS = '10.203.0.6';
export const SOCKS_USER = 'svce2esocks';
export const SOCKS_PASSWORD = 'socks-pw-0123456789-never-shown';
export const SQUID_USER = 'corp';
export const SQUID_PASSWORD = 'squid-pw-9876543210-never-shown';

export interface RealProxy {
  address: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

function inNetns(args: string[]): void {
  execFileSync('ip', ['netns', 'exec', NETNS, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
}

/** dante wants a system account for its username method; made once, idempotently. */
function ensureSocksUser(): void {
  try {
    execFileSync('id', [SOCKS_USER], { stdio: 'ignore' });
  } catch {
    execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', SOCKS_USER]);
  }
  execFileSync('chpasswd', [], { input: `${SOCKS_USER}:${SOCKS_PASSWORD}\n` });
}

function addAddress(address: string): void {
  try {
    inNetns(['ip', 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
  } catch {
    // Already there from an earlier start in this namespace.
  }
}

async function waitListening(address: string, port: number, child: ChildProcess, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode}`);
    const out = execFileSync('ip', ['netns', 'exec', NETNS, 'ss', '-ltnH', `src ${address}:${port}`], { encoding: 'utf8' });
    if (out.trim()) return;
    await sleep(100);
  }
  throw new Error(`${what} is not listening on ${address}:${port} after 10 s`);
}

function managed(address: string, port: number, what: string, argv: () => string[]): RealProxy {
  let child: ChildProcess | undefined;
  const proxy: RealProxy = {
    address: `${address}:${port}`,
    async start() {
      child = spawn('ip', ['netns', 'exec', NETNS, ...argv()], { stdio: ['ignore', 'ignore', 'inherit'] });
      await waitListening(address, port, child, what);
    },
    async stop() {
      if (!child || child.exitCode !== null) return;
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
  return proxy;
}

/** dante on SOCKS_ADDRESS:1080, username/password required. */
export async function startDante(): Promise<RealProxy & { close(): Promise<void> }> {
  ensureSocksUser();
  addAddress(SOCKS_ADDRESS);
  const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-dante-'));
  const conf = join(dir, 'danted.conf');
  writeFileSync(conf, [
    `logoutput: ${join(dir, 'danted.log')}`,
    `internal: ${SOCKS_ADDRESS} port = 1080`,
    `external: ${SOCKS_ADDRESS}`,
    'clientmethod: none',
    'socksmethod: username',
    'user.privileged: root',
    'user.unprivileged: nobody',
    'client pass { from: 0.0.0.0/0 to: 0.0.0.0/0 }',
    'socks pass { from: 0.0.0.0/0 to: 0.0.0.0/0 command: connect }',
    '',
  ].join('\n'));
  const p = managed(SOCKS_ADDRESS, 1080, 'danted', () => ['danted', '-f', conf, '-p', join(dir, 'danted.pid')]);
  await p.start();
  return { ...p, async close() { await p.stop(); rmSync(dir, { recursive: true, force: true }); } };
}

/** squid on SQUID_ADDRESS:3128: HTTP CONNECT to any port, no cache, Basic credentials (SQUID_USER) required. */
export async function startSquid(): Promise<RealProxy & { close(): Promise<void> }> {
  addAddress(SQUID_ADDRESS);
  const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-squid-'));
  chmodSync(dir, 0o777);
  const conf = join(dir, 'squid.conf');
  const passwords = join(dir, 'passwd');
  execFileSync('htpasswd', ['-b', '-c', '-B', passwords, SQUID_USER, SQUID_PASSWORD], { stdio: 'ignore' });
  chmodSync(passwords, 0o644);
  writeFileSync(conf, [
    `http_port ${SQUID_ADDRESS}:3128`,
    `tcp_outgoing_address ${SQUID_ADDRESS}`,
    `auth_param basic program /usr/lib/squid/basic_ncsa_auth ${passwords}`,
    'acl users proxy_auth REQUIRED',
    'http_access allow users',
    'http_access deny all',
    'cache deny all',
    'access_log none',
    `cache_log ${join(dir, 'cache.log')}`,
    `pid_filename ${join(dir, 'squid.pid')}`,
    `coredump_dir ${dir}`,
    'shutdown_lifetime 0 seconds',
    '',
  ].join('\n'));
  const p = managed(SQUID_ADDRESS, 3128, 'squid', () => ['squid', '-N', '-f', conf]);
  await p.start();
  return { ...p, async close() { await p.stop(); rmSync(dir, { recursive: true, force: true }); } };
}
