import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { NEW_SANDBOX_FLOOR_MB } from '@svc/contracts/node-agent';

const MB = 1024 * 1024;

export interface MemoryReading {
  totalMB: number;
  availableMB: number;
  /** What this agent's sandboxes use in all (their parent memory cgroup, page cache left out). */
  sandboxesMB: number;
  /** PSI `some avg10` of /proc/pressure/cpu; -1 where the kernel has no PSI. */
  cpuPressurePct: number;
}

/**
 * Real memory of the host and of this agent's sandboxes. Reads three small files, whatever
 * the number of sandboxes: the parent cgroup's usage holds all of them (hierarchical).
 */
export class MemoryGauge {
  private readonly parentDir: string;

  constructor(cgroupParent: string, cgroupRoot = '/sys/fs/cgroup/memory') {
    this.parentDir = join(cgroupRoot, cgroupParent);
  }

  async read(): Promise<MemoryReading> {
    const meminfo = await readFile('/proc/meminfo', 'utf8');
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(meminfo)?.[1] ?? 0);
    const [usage, stat, psi] = await Promise.all([
      readFile(join(this.parentDir, 'memory.usage_in_bytes'), 'utf8').catch(() => { /* no parent cgroup until the first sandbox starts: nothing used */ return '0'; }),
      readFile(join(this.parentDir, 'memory.stat'), 'utf8').catch(() => { /* no parent cgroup yet: no cache to subtract */ return ''; }),
      readFile('/proc/pressure/cpu', 'utf8').catch(() => { /* a kernel without PSI: no CPU pressure known, none refused for it */ return ''; }),
    ]);
    const some = /^some avg10=([\d.]+)/m.exec(psi);
    const cache = Number(/^total_cache (\d+)$/m.exec(stat)?.[1] ?? 0);
    return {
      totalMB: Math.floor(kb('MemTotal') / 1024),
      availableMB: Math.floor(kb('MemAvailable') / 1024),
      sandboxesMB: Math.max(0, Math.round((Number(usage.trim()) - cache) / MB)),
      cpuPressurePct: some ? Math.round(Number(some[1])) : -1,
    };
  }
}

/** The reserve when memory_reserve_mb is 0: 5% of the node, at least 512 MB. */
export function defaultReserveMB(totalMB: number): number {
  return Math.max(512, Math.round(totalMB * 0.05));
}

/** One more sandbox is expected to take what the present ones take on average. */
export function perSandboxMB(sandboxesMB: number, count: number): number {
  return Math.max(NEW_SANDBOX_FLOOR_MB, count > 0 ? Math.ceil(sandboxesMB / count) : 0);
}
