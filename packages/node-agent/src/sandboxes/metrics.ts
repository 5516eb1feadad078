import { SvcError } from '@svc/common';
import type { SandboxMetrics } from '@svc/contracts/node-agent';
import type { SandboxTable } from './sandbox-table.ts';

/** A sandbox's CPU, memory and disk use (E2B's metrics); CPU use is measured between two reads. */
export class MetricsReader {
  private readonly cpuSamples = new Map<string, { ns: number; at: number }>();

  constructor(private readonly table: SandboxTable) {}

  /**
   * waitForCpu false (the sampler): a sandbox seen for the first time reports 0 % CPU and keeps
   * the read as the base of the next one, instead of waiting 100 ms for a second read.
   */
  async metrics(id: string, opts: { waitForCpu?: boolean } = {}): Promise<SandboxMetrics> {
    const inst = this.table.find(id);
    const key = inst.record.instanceId;
    const read = () => this.table.driverOf(inst).stats(inst.ref).catch((err) => {
      this.table.find(id); // gone meanwhile: 404
      // Its cgroup went away under the read (the sandbox is ending): nothing to measure now, not an internal error.
      if (err instanceof SvcError) throw err;
      throw new SvcError(503, `sandbox ${id}: metrics unavailable: ${(err as Error).message}`);
    });
    let stats = await read();
    let prev = this.cpuSamples.get(key);
    if (!prev || Date.now() - prev.at > 60_000) {
      prev = { ns: stats.cpuUsageNs, at: Date.now() };
      // No recent read to measure against: take a short one, unless the caller would rather have 0 now.
      if (opts.waitForCpu !== false) {
        await new Promise((r) => setTimeout(r, 100));
        stats = await read();
      }
    }
    const now = Date.now();
    const cpuPct = now > prev.at ? ((stats.cpuUsageNs - prev.ns) / 1e6 / (now - prev.at) / inst.record.cpuCount) * 100 : 0;
    this.cpuSamples.set(key, { ns: stats.cpuUsageNs, at: now });
    return {
      timestampUnix: Math.floor(now / 1000),
      cpuCount: inst.record.cpuCount,
      cpuUsedPct: Math.round(Math.min(100, Math.max(0, cpuPct)) * 100) / 100,
      memUsed: stats.memUsedBytes,
      memTotal: inst.record.memoryMB * 1024 * 1024,
      memCache: stats.memCacheBytes,
      diskUsed: stats.diskUsedBytes,
      diskTotal: inst.record.diskSizeMB * 1024 * 1024,
    };
  }

  /** Drops the instance's last CPU sample (it was destroyed). */
  forget(instanceId: string): void {
    this.cpuSamples.delete(instanceId);
  }
}
