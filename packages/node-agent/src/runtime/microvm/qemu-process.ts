import { readFile, rm } from 'node:fs/promises';
import { run } from '../../host/exec.ts';
import type { InstanceRef } from '../driver.ts';
import { QmpClient } from '../qmp.ts';
import { microvmPaths } from './instance-files.ts';

const QMP_TIMEOUT_MS = 10_000;

/**
 * QEMU runs as root and parses what a guest sends its devices: its seccomp filter takes away the
 * system calls it never needs (QEMU's default list, the obsolete ones, and scheduling and
 * priority changes), so that a guest that breaks out through a device bug gets less of the host.
 * Two of QEMU's sets are left out, each because QEMU 7.2 then dies at start (measured): spawn=deny
 * kills it at -daemonize's fork (SIGSYS), and saves and restores go through `exec:cat` (QEMU 7.2
 * has no `file:` migration); elevateprivileges=deny kills it at -daemonize's setsid (exit 1). On
 * every start, so that a resume of a machine whose launch.json predates this gets it too.
 */
const QEMU_SANDBOX = ['-sandbox', 'on,obsolete=deny,resourcecontrol=deny'];

/** Starts QEMU detached (it outlives the agent), in the sandbox's namespace. */
export async function startQemu(qemu: string, ref: InstanceRef, argv: string[], incoming?: string): Promise<void> {
  const paths = microvmPaths(ref.dir);
  await rm(paths.qmp, { force: true });
  await rm(paths.pid, { force: true });
  const r = await run('nsenter', [`--net=${ref.netnsPath}`, qemu, ...argv, ...QEMU_SANDBOX, ...(incoming ? ['-incoming', incoming] : []), '-daemonize', '-pidfile', paths.pid],
    { timeoutMs: 60_000, allowFail: true });
  if (r.code !== 0) throw new Error(`QEMU did not start (exit ${r.code}): ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ')}`);
}

/** QEMU's pid while it runs for this instance (the pid file names it; pids get reused). */
export async function qemuPid(ref: InstanceRef): Promise<number | undefined> {
  const paths = microvmPaths(ref.dir);
  const pid = Number((await readFile(paths.pid, 'utf8').catch(() => { /* no pid file: QEMU never started, or was ended (endQemu removes it) */ return ''; })).trim());
  if (!pid) return undefined;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* no such process: QEMU has ended */ return ''; });
  if (!cmdline.includes(paths.qmp)) return undefined;
  const state = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => { /* it ended between the two reads */ return ''; });
  return state.slice(state.lastIndexOf(')') + 2).startsWith('Z') ? undefined : pid;
}

/** Kills QEMU (a paused instance has none) and waits until it is gone. */
export async function endQemu(ref: InstanceRef): Promise<void> {
  const pid = await qemuPid(ref);
  if (!pid) return;
  try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  const deadline = Date.now() + 10_000;
  while (await qemuPid(ref) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  await rm(microvmPaths(ref.dir).pid, { force: true });
}

/** One conversation with the instance's QEMU over its QMP socket. */
export async function withQmp<T>(ref: InstanceRef, fn: (q: QmpClient) => Promise<T>): Promise<T> {
  const q = await QmpClient.connect(microvmPaths(ref.dir).qmp, { timeoutMs: QMP_TIMEOUT_MS });
  try {
    return await fn(q);
  } finally {
    q.close();
  }
}

/** QEMU's CPU time (utime and stime) in ns. */
export async function cpuUsageNs(pid: number): Promise<number> {
  const s = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = s.slice(s.lastIndexOf(')') + 2).split(' ');
  // utime and stime (fields 14 and 15) in clock ticks of 1/100 s.
  return (Number(fields[11]) + Number(fields[12])) * 10_000_000;
}

/**
 * QEMU's resident memory: the guest's RAM in use plus QEMU's own. Not offered as
 * memoryUsedBytes: the guest kernel has its own OOM killer, which ends one process.
 */
export async function residentBytes(pid: number | undefined): Promise<number> {
  if (!pid) return 0;
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
}
