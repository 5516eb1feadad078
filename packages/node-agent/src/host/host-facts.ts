import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { randomId, type Logger } from '@svc/common';

/** Config values win; zero means "what the host has". */
export function nodeCapacity(cfg: { cpu_count: number; memory_mb: number }): { cpuCount: number; memoryMB: number } {
  return {
    cpuCount: cfg.cpu_count > 0 ? cfg.cpu_count : cpus().length,
    memoryMB: cfg.memory_mb > 0 ? cfg.memory_mb : Math.floor(totalmem() / (1024 * 1024)),
  };
}

/** The configured node id, else one made up once and kept in the state directory. */
export async function resolveNodeId(configured: string, stateDir: string): Promise<string> {
  if (configured) return configured;
  const file = join(stateDir, 'node-id');
  // Only a missing file makes a new id: any other failure would give the node a second identity.
  const existing = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => { if (err.code === 'ENOENT') return ''; throw err; });
  if (existing.trim()) return existing.trim();
  const id = `node-${randomId(12)}`;
  await mkdir(stateDir, { recursive: true });
  await writeFile(file, `${id}\n`, { flag: 'wx' }).catch(() => { /* another start wrote it first (EEXIST): the read below takes that one, and shows any other failure */ });
  return (await readFile(file, 'utf8')).trim();
}

/** Sandboxes reach outside through the host's routing: forwarding must be on. */
export async function enableIpForwarding(logger: Logger): Promise<void> {
  const path = '/proc/sys/net/ipv4/ip_forward';
  if ((await readFile(path, 'utf8')).trim() === '1') return;
  await writeFile(path, '1');
  logger.info('enabled net.ipv4.ip_forward for sandbox egress');
}

/**
 * Every gVisor sandbox holds 60 or more host tasks idle under ptrace (sentry, gofer, stubs) and
 * 7 to 11 more a process (runtime/host-tasks.ts), so the kernel's default of 32768 tasks caps a
 * host at a few hundred sandboxes long before memory does. Raised to the kernel's largest
 * value, once, when lower; the sandboxes' pids caps are taken from what it is then.
 */
export async function raisePidMax(logger: Logger, want = 4_194_304): Promise<void> {
  const path = '/proc/sys/kernel/pid_max';
  const cur = Number((await readFile(path, 'utf8')).trim());
  if (cur >= want) return;
  try {
    await writeFile(path, String(want));
    logger.info({ from: cur, to: want }, 'raised kernel.pid_max so that many sandboxes fit');
  } catch (err) {
    logger.warn({ pidMax: cur, err: (err as Error).message }, 'could not raise kernel.pid_max; it limits how many sandboxes this host holds');
  }
}

/** DNS servers a sandbox can use: the host's, minus loopback ones that mean nothing in a sandbox. */
export async function sandboxResolvConf(): Promise<string | undefined> {
  const text = await readFile('/etc/resolv.conf', 'utf8').catch(() => { /* a host without resolv.conf: sandboxes keep their image's own */ return ''; });
  const servers = [...text.matchAll(/^nameserver\s+(\S+)/gm)].map((m) => m[1]).filter((s) => !s.startsWith('127.') && s !== '::1' && !s.includes(':'));
  if (!servers.length) return undefined;
  return servers.map((s) => `nameserver ${s}`).join('\n') + '\n';
}

/** Missing host tools, named, so the agent fails at start with one clear line. */
export function missingTools(tools: string[]): string[] {
  const path = (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':');
  return tools.filter((t) => (t.startsWith('/') ? !existsSync(t) : !path.some((d) => existsSync(join(d, t)))));
}
