import type { Logger } from '@svc/common';
import type { InstanceResources } from '../runtime/driver.ts';
import type { Instance } from './instances.ts';
import type { WarmPoolStats } from '../api.ts';

export interface WarmPoolDeps {
  /** Warm sandboxes each used template starts with, and falls back to when idle; 0: no pool. */
  size: number;
  /** The most a template's pool grows to while creates find it empty. */
  max: number;
  /** Resources warm sandboxes start with; a create asking for others starts cold. */
  shape: InstanceResources;
  logger: Logger;
  start: (artifactId: string, signal: AbortSignal) => Promise<Instance>;
  destroy: (inst: Instance) => Promise<void>;
  /** Whether the node has memory for one more warm sandbox now (memory admission). */
  hasRoom?: () => boolean;
  /** Wait after a failed start before trying again. */
  retryMs?: number;
  /** Starts under way at once per template (the host's cores start them in parallel). */
  concurrency?: number;
  /** A pool grown by demand gives one back after this long without a hand-out. */
  shrinkAfterMs?: number;
}

interface ArtifactPool {
  ready: Instance[];
  target: number;
  starting: number;
  hits: number;
  misses: number;
  lastHandOut: number;
}

/**
 * Sandboxes started ahead, per template artifact, so a create only has to personalise one.
 * Sized by demand: a used template starts at `size`; each create that finds its pool empty
 * grows it by one up to `max`; a pool without a hand-out for `shrinkAfterMs` gives one back down
 * to `size`; nothing is started while the node's memory admission has no room. Refilled as soon as
 * one is taken, emptied when the artifact goes away and when the agent closes.
 */
export class WarmPool {
  private readonly pools = new Map<string, ArtifactPool>();
  private readonly filling = new Map<string, Promise<void>>();
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
  private readonly draining = new Set<string>();
  private readonly abort = new AbortController();
  private readonly shrinkTimer: NodeJS.Timeout;
  private hits = 0;
  private misses = 0;
  private closed = false;

  constructor(private readonly d: WarmPoolDeps) {
    const shrinkAfter = d.shrinkAfterMs ?? 300_000;
    this.shrinkTimer = setInterval(() => void this.shrinkIdle(shrinkAfter), Math.max(1_000, Math.floor(shrinkAfter / 5)));
    this.shrinkTimer.unref();
  }

  get enabled() { return this.d.size > 0; }

  count(): number {
    let n = 0;
    for (const p of this.pools.values()) n += p.ready.length;
    return n;
  }

  instances(): Instance[] {
    return [...this.pools.values()].flatMap((p) => p.ready);
  }

  stats(): WarmPoolStats {
    const artifacts: WarmPoolStats['artifacts'] = {};
    for (const [id, p] of this.pools) artifacts[id] = { ready: p.ready.length, target: p.target, hits: p.hits, misses: p.misses };
    return { hits: this.hits, misses: this.misses, ready: this.count(), artifacts };
  }

  matches(r: InstanceResources): boolean {
    const s = this.d.shape;
    return r.cpuCount === s.cpuCount && r.memoryMB === s.memoryMB && r.diskSizeMB === s.diskSizeMB;
  }

  /** A ready warm instance of this artifact and shape, taken out of the pool (and refilled at once). */
  take(artifactId: string, r: InstanceResources): Instance | undefined {
    if (!this.enabled || this.closed || !this.matches(r)) return undefined;
    const p = this.pool(artifactId);
    const inst = p.ready.shift();
    if (inst) {
      p.hits++;
      this.hits++;
      p.lastHandOut = Date.now();
    } else {
      p.misses++;
      this.misses++;
      p.target = Math.min(this.d.max, p.target + 1);
    }
    this.fill(artifactId);
    return inst;
  }

  /** Starts filling the artifact's pool in the background (no-op when full or already filling). */
  fill(artifactId: string): void {
    if (!this.enabled || this.closed || this.draining.has(artifactId) || this.filling.has(artifactId)) return;
    const p = this.fillLoop(artifactId).finally(() => this.filling.delete(artifactId));
    this.filling.set(artifactId, p);
  }

  /** Forgets an instance that died while waiting in the pool. */
  discard(inst: Instance): void {
    const list = this.pools.get(inst.record.artifactId)?.ready;
    const i = list?.indexOf(inst) ?? -1;
    if (list && i >= 0) list.splice(i, 1);
  }

  /** Destroys the artifact's warm instances and stops filling it (the artifact is being deleted). */
  async drain(artifactId: string): Promise<void> {
    this.draining.add(artifactId);
    try {
      clearTimeout(this.retryTimers.get(artifactId));
      await this.filling.get(artifactId)?.catch(() => { /* a failed fill was logged by the loop */ });
      const list = this.pools.get(artifactId)?.ready ?? [];
      this.pools.delete(artifactId);
      await Promise.all(list.map((inst) => this.destroy(inst)));
    } finally {
      this.draining.delete(artifactId);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.shrinkTimer);
    this.abort.abort(new Error('warm pool closing'));
    for (const t of this.retryTimers.values()) clearTimeout(t);
    await Promise.allSettled([...this.filling.values()]);
    const all = this.instances();
    this.pools.clear();
    await Promise.all(all.map((inst) => this.destroy(inst)));
  }

  private pool(artifactId: string): ArtifactPool {
    let p = this.pools.get(artifactId);
    if (!p) {
      p = { ready: [], target: this.d.size, starting: 0, hits: 0, misses: 0, lastHandOut: Date.now() };
      this.pools.set(artifactId, p);
    }
    return p;
  }

  private wantsMore(artifactId: string, p: ArtifactPool): boolean {
    if (this.closed || this.draining.has(artifactId) || p.ready.length + p.starting >= p.target) return false;
    return this.d.hasRoom?.() ?? true;
  }

  private async fillLoop(artifactId: string): Promise<void> {
    const p = this.pool(artifactId);
    let failed = false;
    const worker = async () => {
      while (!failed && this.wantsMore(artifactId, p)) {
        p.starting++;
        let inst: Instance;
        try {
          inst = await this.d.start(artifactId, this.abort.signal);
        } catch (err) {
          if (this.closed) return;
          failed = true;
          this.d.logger.warn({ err, artifactId }, 'warm sandbox start failed; retrying later');
          clearTimeout(this.retryTimers.get(artifactId));
          this.retryTimers.set(artifactId, setTimeout(() => { this.retryTimers.delete(artifactId); this.fill(artifactId); }, this.d.retryMs ?? 30_000).unref());
          return;
        } finally {
          p.starting--;
        }
        if (this.closed || this.draining.has(artifactId) || this.pools.get(artifactId) !== p) {
          await this.destroy(inst);
          return;
        }
        p.ready.push(inst);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, this.d.concurrency ?? 2) }, worker));
  }

  /** Pools that grew by demand and have handed nothing out for a while give one back. */
  private async shrinkIdle(afterMs: number): Promise<void> {
    const now = Date.now();
    for (const [artifactId, p] of this.pools) {
      if (p.target <= this.d.size || now - p.lastHandOut < afterMs || this.draining.has(artifactId)) continue;
      p.target--;
      p.lastHandOut = now;
      while (p.ready.length > p.target) {
        const extra = p.ready.pop()!;
        await this.destroy(extra);
      }
    }
  }

  private destroy(inst: Instance): Promise<void> {
    return this.d.destroy(inst).catch((err) => this.d.logger.warn({ err, instanceId: inst.record.instanceId }, 'warm sandbox destroy failed'));
  }
}
