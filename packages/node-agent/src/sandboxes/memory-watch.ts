import type { Logger } from '@svc/common';
import { ENVD_PORT } from '@svc/contracts/envd-port';
import type { Instance } from './instances.ts';

export interface MemoryWatchDeps {
  logger: Logger;
  /** Running instances (paused ones are frozen and cannot grow). */
  running: () => Instance[];
  usedBytes: (inst: Instance) => Promise<number>;
  /** Tells envd in the instance that its memory is filling up. */
  alert?: (inst: Instance) => Promise<void>;
  intervalMs?: number;
}

const ALERT_SHARE = 0.5;
const REALERT_MS = 10_000;

/**
 * The host half of the sandbox OOM killer (docs/decisions.md, "Sandbox limits under gVisor"):
 * reads every running sandbox's host memory once a second, a cheap read here and a dear one
 * inside gVisor, and alerts its envd once it holds half its memory, so that the guard in envd
 * reads fast only while it matters.
 */
export class MemoryWatch {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private readonly alertedAt = new Map<string, number>();

  constructor(private readonly d: MemoryWatchDeps) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = true;
      this.sweep().catch((err) => this.d.logger.warn({ err: (err as Error).message }, 'memory watch failed')).finally(() => { this.running = false; });
    }, this.d.intervalMs ?? 500);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async sweep(): Promise<void> {
    const now = Date.now();
    const live = new Set<string>();
    for (const inst of this.d.running()) {
      live.add(inst.record.instanceId);
      const used = await this.d.usedBytes(inst).catch((err: Error) => {
        // Usually its cgroup went with the sandbox between the list and the read; watched again next round.
        this.d.logger.debug({ instanceId: inst.record.instanceId, err: err.message }, 'memory use unreadable; not watched this round');
        return 0;
      });
      if (used < inst.record.memoryMB * 1024 * 1024 * ALERT_SHARE) continue;
      if (now - (this.alertedAt.get(inst.record.instanceId) ?? 0) < REALERT_MS) continue;
      this.alertedAt.set(inst.record.instanceId, now);
      (this.d.alert ?? alertEnvd)(inst).catch((err) => this.d.logger.debug({ instanceId: inst.record.instanceId, err: (err as Error).message }, 'memory alert to envd failed'));
    }
    for (const id of this.alertedAt.keys()) if (!live.has(id)) this.alertedAt.delete(id);
  }
}

async function alertEnvd(inst: Instance): Promise<void> {
  // redirect: manual: whatever answers there is the sandbox's, and the node agent runs as root on the host.
  const res = await fetch(`http://${inst.record.address}:${ENVD_PORT}/svc/memory-pressure`, { method: 'POST', signal: AbortSignal.timeout(2_000), redirect: 'manual' });
  await res.body?.cancel();
}
