import { openSync, readSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

const MiB = 1024 * 1024;

export interface MemoryGuardOptions {
  /** Kill once free memory falls below this share of the total (or 4 MiB, whichever is larger). */
  reserveRatio?: number;
  /**
   * Reading the sandbox's memory is dear under gVisor (/proc/meminfo makes the sentry scan its
   * memory file), and hundreds of idle sandboxes share a host. So the guard reads rarely
   * (idleIntervalMs) until it is alerted: the node agent watches every sandbox's memory from the
   * host, where a read is cheap, and alerts envd (POST /svc/memory-pressure) once a sandbox uses
   * half its memory. While alerted it waits about as long as the fastest allocator could take
   * to use up the free memory (ALLOCATION_RATE), between busyIntervalMs and alertIntervalMs.
   */
  idleIntervalMs?: number;
  alertIntervalMs?: number;
  busyIntervalMs?: number;
  /** How long one alert keeps the guard reading fast. */
  alertMs?: number;
  /** After a kill, memory takes a moment to come back; no second victim before then. */
  cooldownMs?: number;
  log?: (line: string) => void;
  procDir?: string;
}

export interface MemoryReading { totalBytes: number; freeBytes: number }

export interface Victim { pid: number; comm: string; residentBytes: number }

/**
 * The sandbox's OOM killer. gVisor has none of its own: processes may use more than the
 * sandbox's memory, and the host cgroup then kills the whole sentry. This watches the
 * sandbox's memory as gVisor reports it (/proc/meminfo, sized from the OCI limit) and, when it
 * is nearly full, SIGKILLs the process with the largest resident set, as Linux's OOM killer
 * would. Never envd, its ancestors (the init, PID 1) or a process whose oom_score_adj is -1000.
 */
export class MemoryGuard {
  private timer: NodeJS.Timeout | undefined;
  private nextTickAt = 0;
  private alertUntil = 0;
  private stopped = false;
  private coolUntil = 0;
  private readonly o: Required<MemoryGuardOptions>;

  constructor(opts: MemoryGuardOptions = {}) {
    this.o = {
      reserveRatio: 0.02, idleIntervalMs: 30_000, alertIntervalMs: 500, busyIntervalMs: 50, alertMs: 20_000, cooldownMs: 300,
      log: (line) => console.error(line), procDir: '/proc', ...opts,
    };
  }

  start(): void {
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Memory is filling up (the node agent saw it from the host): read fast for a while. */
  alert(): void {
    this.alertUntil = Date.now() + this.o.alertMs;
    if (this.nextTickAt - Date.now() > this.o.busyIntervalMs) {
      clearTimeout(this.timer);
      this.schedule(0);
    }
  }

  private schedule(ms: number) {
    if (this.stopped) return;
    this.nextTickAt = Date.now() + ms;
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private readonly meminfo = new MeminfoReader();

  private async tick(): Promise<void> {
    let next = this.o.idleIntervalMs;
    try {
      const m = this.meminfo.read(this.o.procDir);
      const threshold = Math.max(m.totalBytes * this.o.reserveRatio, 4 * MiB);
      const slackMs = ((m.freeBytes - threshold) / ALLOCATION_RATE) * 1000;
      const alerted = Date.now() < this.alertUntil || m.freeBytes < m.totalBytes / 2;
      next = alerted ? Math.min(this.o.alertIntervalMs, Math.max(this.o.busyIntervalMs, slackMs)) : this.o.idleIntervalMs;
      if (m.freeBytes < threshold && Date.now() >= this.coolUntil) {
        await this.killLargest(m);
      }
    } catch (err) {
      this.o.log(`envd: memory guard: ${(err as Error).message}`);
      next = 1_000;
    }
    this.schedule(next);
  }

  private async killLargest(m: MemoryReading): Promise<void> {
    const victim = await largestProcess(this.o.procDir, await protectedPids(this.o.procDir));
    if (!victim) return;
    try {
      process.kill(victim.pid, 'SIGKILL');
    } catch (err) {
      this.o.log(`envd: memory guard: could not kill pid ${victim.pid}: ${(err as Error).message}`);
      return;
    }
    this.coolUntil = Date.now() + this.o.cooldownMs;
    this.o.log(`envd: memory guard: out of memory (${mib(m.totalBytes - m.freeBytes)} of ${mib(m.totalBytes)} MiB used): killed pid ${victim.pid} (${victim.comm}) using ${mib(victim.residentBytes)} MiB`);
  }
}

const mib = (b: number) => Math.round(b / MiB);

/** Bytes per second a process can allocate and touch here (about 230 MB/s measured under ptrace), with a margin. */
const ALLOCATION_RATE = 512 * MiB;

/** /proc/meminfo read with one pread on a file kept open (gVisor regenerates it at offset 0). */
class MeminfoReader {
  private fd: number | undefined;
  private dir = '';
  private readonly buf = Buffer.alloc(16 * 1024);

  read(procDir: string): MemoryReading {
    if (this.fd === undefined || this.dir !== procDir) {
      this.fd = openSync(`${procDir}/meminfo`, 'r');
      this.dir = procDir;
    }
    const n = readSync(this.fd, this.buf, 0, this.buf.length, 0);
    return parseMeminfo(this.buf.toString('latin1', 0, n));
  }
}

/** Total and free memory of the sandbox. gVisor clamps MemFree at 0 once processes use more than the total. */
export async function readMemory(procDir = '/proc'): Promise<MemoryReading> {
  return parseMeminfo(await readFile(`${procDir}/meminfo`, 'utf8'));
}

function parseMeminfo(text: string): MemoryReading {
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  const totalBytes = kb('MemTotal');
  const freeBytes = kb('MemAvailable');
  if (!Number.isFinite(totalBytes) || !Number.isFinite(freeBytes)) throw new Error('/proc/meminfo lacks MemTotal or MemAvailable');
  return { totalBytes, freeBytes };
}

/** envd and every ancestor of it (the init, PID 1): killing one would take the sandbox's agent down. */
async function protectedPids(procDir: string): Promise<Set<number>> {
  const pids = new Set<number>([1, process.pid]);
  let pid = process.ppid;
  while (pid > 1 && !pids.has(pid)) {
    pids.add(pid);
    pid = (await procStat(procDir, pid))?.ppid ?? 0;
  }
  return pids;
}

export async function largestProcess(procDir: string, exclude: Set<number>): Promise<Victim | undefined> {
  let best: Victim | undefined;
  for (const name of await readdir(procDir)) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (exclude.has(pid)) continue;
    const [statm, stat, adj] = await Promise.all([
      readFile(`${procDir}/${pid}/statm`, 'utf8').catch(() => { /* exited since the listing (ENOENT, ESRCH): no candidate */ return ''; }),
      procStat(procDir, pid),
      readFile(`${procDir}/${pid}/oom_score_adj`, 'utf8').catch(() => { /* exited since the listing: procStat drops it */ return '0'; }),
    ]);
    if (!stat || stat.state === 'Z' || Number(adj.trim()) === -1000) continue;
    const residentBytes = Number(statm.split(' ')[1] ?? 0) * 4096;
    if (!best || residentBytes > best.residentBytes) best = { pid, comm: stat.comm, residentBytes };
  }
  return best;
}

async function procStat(procDir: string, pid: number): Promise<{ comm: string; state: string; ppid: number } | undefined> {
  const text = await readFile(`${procDir}/${pid}/stat`, 'utf8').catch(() => { /* the process has exited (ENOENT, ESRCH): no parent, no candidate */ return undefined; });
  if (!text) return undefined;
  const close = text.lastIndexOf(')');
  const [state, ppid] = text.slice(close + 2).split(' ');
  return { comm: text.slice(text.indexOf('(') + 1, close), state, ppid: Number(ppid) };
}
