import { availableParallelism } from 'node:os';
import { readFile, statfs } from 'node:fs/promises';

interface CpuTimes {
  busy: number;
  total: number;
}

async function readCpuTimes(): Promise<CpuTimes | undefined> {
  const text = await readFile('/proc/stat', 'utf8').catch((err: Error) => {
    console.error(`metrics: cannot read /proc/stat, CPU use reads 0: ${err.message}`);
    return undefined;
  });
  const line = text?.split('\n', 1)[0];
  if (!line?.startsWith('cpu ')) return undefined;
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  // guest time is already counted in user time
  const total = values.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

async function readMeminfo(): Promise<Map<string, number>> {
  const text = await readFile('/proc/meminfo', 'utf8').catch((err: Error) => {
    console.error(`metrics: cannot read /proc/meminfo, memory reads 0: ${err.message}`);
    return '';
  });
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s+kB)?$/.exec(line.trim());
    if (match) values.set(match[1]!, Number(match[2]) * (line.includes('kB') ? 1024 : 1));
  }
  return values;
}

/** GET /metrics: the fields E2B's envd reports (CPU since the previous call, memory, root disk). */
export class MetricsCollector {
  private last: Promise<CpuTimes | undefined>;

  constructor() {
    this.last = readCpuTimes();
  }

  async collect(): Promise<Record<string, number>> {
    const rootFs = statfs('/').catch((err: Error) => {
      console.error(`metrics: cannot statfs /, disk reads 0: ${err.message}`);
      return undefined;
    });
    const [previous, current, mem, disk] = await Promise.all([this.last, readCpuTimes(), readMeminfo(), rootFs]);
    this.last = Promise.resolve(current);
    let cpuPct = 0;
    if (previous && current && current.total > previous.total) {
      cpuPct = Math.round(((current.busy - previous.busy) / (current.total - previous.total)) * 10000) / 100;
    }
    const total = mem.get('MemTotal') ?? 0;
    const cached = (mem.get('Cached') ?? 0) + (mem.get('SReclaimable') ?? 0);
    const used = Math.max(0, total - (mem.get('MemFree') ?? 0) - (mem.get('Buffers') ?? 0) - cached);
    const diskTotal = disk ? disk.blocks * disk.bsize : 0;
    const diskFree = disk ? disk.bavail * disk.bsize : 0;
    return {
      ts: Math.floor(Date.now() / 1000),
      cpu_count: availableParallelism(),
      cpu_used_pct: cpuPct,
      mem_total_mib: Math.floor(total / 1048576),
      mem_used_mib: Math.floor(used / 1048576),
      mem_total: total,
      mem_used: used,
      mem_cache: cached,
      disk_used: diskTotal - diskFree,
      disk_total: diskTotal,
    };
  }
}
