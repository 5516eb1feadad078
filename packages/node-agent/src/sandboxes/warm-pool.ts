import type { Logger } from '@svc/common';
import type { InstanceResources } from '../runtime/driver.ts';
import type { Instance } from './instances.ts';

export interface WarmPoolDeps {
  size: number;
  /** Resources warm sandboxes start with; a create asking for others starts cold. */
  shape: InstanceResources;
  logger: Logger;
  start: (artifactId: string, signal: AbortSignal) => Promise<Instance>;
  destroy: (inst: Instance) => Promise<void>;
  /** Wait after a failed start before trying again. */
  retryMs?: number;
}

/**
 * Sandboxes started ahead, per artifact, so a create only has to personalise one. Filled one
 * at a time in the background after an artifact is first used or ensured, refilled after each
 * hand-out, emptied when the artifact goes away and when the agent closes.
 */
export class WarmPool {
  private readonly ready = new Map<string, Instance[]>();
  private readonly filling = new Map<string, Promise<void>>();
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
  private readonly draining = new Set<string>();
  private readonly abort = new AbortController();
  private closed = false;

  constructor(private readonly d: WarmPoolDeps) {}

  get enabled() { return this.d.size > 0; }

  count(): number {
    let n = 0;
    for (const list of this.ready.values()) n += list.length;
    return n;
  }

  instances(): Instance[] {
    return [...this.ready.values()].flat();
  }

  matches(r: InstanceResources): boolean {
    const s = this.d.shape;
    return r.cpuCount === s.cpuCount && r.memoryMB === s.memoryMB && r.diskSizeMB === s.diskSizeMB;
  }

  /** A ready warm instance of this artifact and shape, taken out of the pool. */
  take(artifactId: string, r: InstanceResources): Instance | undefined {
    if (!this.enabled || this.closed || !this.matches(r)) return undefined;
    return this.ready.get(artifactId)?.shift();
  }

  /** Starts filling the artifact's pool in the background (no-op when full or already filling). */
  fill(artifactId: string): void {
    if (!this.enabled || this.closed || this.draining.has(artifactId) || this.filling.has(artifactId)) return;
    const p = this.fillLoop(artifactId).finally(() => this.filling.delete(artifactId));
    this.filling.set(artifactId, p);
  }

  /** Forgets an instance that died while waiting in the pool. */
  discard(inst: Instance): void {
    const list = this.ready.get(inst.record.artifactId);
    const i = list?.indexOf(inst) ?? -1;
    if (list && i >= 0) list.splice(i, 1);
  }

  /** Destroys the artifact's warm instances and stops filling it (the artifact is being deleted). */
  async drain(artifactId: string): Promise<void> {
    this.draining.add(artifactId);
    try {
      clearTimeout(this.retryTimers.get(artifactId));
      await this.filling.get(artifactId)?.catch(() => {});
      const list = this.ready.get(artifactId) ?? [];
      this.ready.delete(artifactId);
      await Promise.all(list.map((inst) => this.d.destroy(inst).catch((err) => this.d.logger.warn({ err }, 'warm sandbox destroy failed'))));
    } finally {
      this.draining.delete(artifactId);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.abort.abort(new Error('warm pool closing'));
    for (const t of this.retryTimers.values()) clearTimeout(t);
    await Promise.allSettled([...this.filling.values()]);
    const all = this.instances();
    this.ready.clear();
    await Promise.all(all.map((inst) => this.d.destroy(inst).catch((err) => this.d.logger.warn({ err }, 'warm sandbox destroy failed'))));
  }

  private async fillLoop(artifactId: string): Promise<void> {
    while (!this.closed && !this.draining.has(artifactId) && (this.ready.get(artifactId)?.length ?? 0) < this.d.size) {
      let inst: Instance;
      try {
        inst = await this.d.start(artifactId, this.abort.signal);
      } catch (err) {
        if (this.closed) return;
        this.d.logger.warn({ err, artifactId }, 'warm sandbox start failed; retrying later');
        clearTimeout(this.retryTimers.get(artifactId));
        this.retryTimers.set(artifactId, setTimeout(() => { this.retryTimers.delete(artifactId); this.fill(artifactId); }, this.d.retryMs ?? 30_000).unref());
        return;
      }
      if (this.closed || this.draining.has(artifactId)) {
        await this.d.destroy(inst).catch((err) => this.d.logger.warn({ err }, 'warm sandbox destroy failed'));
        return;
      }
      const list = this.ready.get(artifactId) ?? [];
      list.push(inst);
      this.ready.set(artifactId, list);
    }
  }
}
