import { availableParallelism } from 'node:os';
import { Slots, type Logger } from '@svc/common';
import type { InstanceResources } from '../runtime/driver.ts';
import type { Instance } from './instances.ts';
import type { WarmPoolStats } from '@svc/contracts/node-agent';

export interface WarmPoolDeps {
  /** Warm sandboxes each used template keeps at least, falling back to them when idle; 0: no pool. */
  size: number;
  /** What a template's pool starts with (default `size`): enough for a first burst of creates. */
  initial?: number;
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
  /** Starts under way at once on the whole node, whatever the templates (default: one per core, at least 2; common's Slots). */
  nodeConcurrency?: number;
  /** A pool grown by demand gives one back after this long without a hand-out. */
  shrinkAfterMs?: number;
  /**
   * The refill starts once this long has passed without a hand-out (default 300 ms): the new
   * sandbox's first commands follow its create at once, and during a burst of creates so do the
   * next creates; a refill's boot would compete with them for the host's CPU. A create that finds
   * the pool empty refills at once.
   */
  refillDelayMs?: number;
  /** How long a create that finds the pool empty waits for a warm start already under way (default 5 s). */
  maxWaitMs?: number;
}

interface Waiter {
  give(inst: Instance | undefined): void;
}

interface ArtifactPool {
  ready: Instance[];
  target: number;
  starting: number;
  hits: number;
  misses: number;
  lastHandOut: number;
  /** Creates that found the pool empty and wait for a start under way, oldest first. */
  waiters: Waiter[];
}

/**
 * Sandboxes started ahead, per template artifact, so a create only has to personalise one.
 * Sized by demand: a used template starts at `initial`; each create that finds its pool empty
 * grows it by one up to `max`; a pool without a hand-out for `shrinkAfterMs` gives one back down
 * to `size`; nothing is started while the node's memory admission has no room. Refilled once
 * hand-outs pause (refillDelayMs), emptied when the artifact goes away and when the agent
 * closes. A create that finds it empty takes the next warm sandbox whose start is already under
 * way rather than booting one of its own, when one is.
 */
export class WarmPool {
  private readonly pools = new Map<string, ArtifactPool>();
  private readonly filling = new Map<string, Promise<void>>();
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
  private readonly refillTimers = new Map<string, NodeJS.Timeout>();
  private readonly draining = new Set<string>();
  /** The template whose create last asked each artifact's pool for a sandbox (the pool knows artifacts only). */
  private readonly templates = new Map<string, string>();
  private readonly abort = new AbortController();
  private readonly slots: Slots;
  private readonly shrinkTimer: NodeJS.Timeout;
  private hits = 0;
  private misses = 0;
  private closed = false;

  constructor(private readonly d: WarmPoolDeps) {
    this.slots = new Slots(d.nodeConcurrency ?? Math.max(2, availableParallelism()));
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

  /** Ready warm sandboxes of each artifact, with the template whose create last asked for one ('' before any did). */
  readyByArtifact(): Array<{ artifactId: string; templateId: string; ready: number }> {
    return [...this.pools].map(([artifactId, p]) => ({ artifactId, templateId: this.templates.get(artifactId) ?? '', ready: p.ready.length }));
  }

  /**
   * A warm instance of this artifact and shape: a ready one, or, when none is ready, the next one
   * whose start is under way (waiting at most maxWaitMs). Undefined: start one cold.
   */
  async take(artifactId: string, r: InstanceResources, templateId?: string): Promise<Instance | undefined> {
    if (templateId) this.templates.set(artifactId, templateId);
    if (!this.enabled || this.closed || !this.matches(r)) return undefined;
    const p = this.pool(artifactId);
    const inst = p.ready.shift();
    if (inst) {
      p.hits++;
      this.hits++;
      p.lastHandOut = Date.now();
      this.refillSoon(artifactId);
      return inst;
    }
    p.misses++;
    this.misses++;
    p.target = Math.min(this.d.max, p.target + 1);
    // Only a start already under way is worth waiting for: one this miss sets off would boot no
    // sooner than a cold start, and slower (it boots at a low CPU weight and runs the warm-up).
    const underWay = p.starting - p.waiters.length;
    this.fill(artifactId);
    if (underWay <= 0) return undefined;
    const waited = await new Promise<Instance | undefined>((resolve) => {
      const timer = setTimeout(() => {
        p.waiters.splice(p.waiters.indexOf(waiter), 1);
        resolve(undefined);
      }, this.d.maxWaitMs ?? 5_000);
      const waiter: Waiter = { give: (i) => { clearTimeout(timer); resolve(i); } };
      p.waiters.push(waiter);
    });
    if (waited) p.lastHandOut = Date.now();
    return waited;
  }

  private refillSoon(artifactId: string): void {
    clearTimeout(this.refillTimers.get(artifactId));
    this.refillTimers.set(artifactId, setTimeout(() => {
      this.refillTimers.delete(artifactId);
      this.fill(artifactId);
    }, this.d.refillDelayMs ?? 300).unref());
  }

  /** Sends away every create waiting on this pool: they start cold. */
  private releaseWaiters(p: ArtifactPool): void {
    for (const w of p.waiters.splice(0)) w.give(undefined);
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
      clearTimeout(this.refillTimers.get(artifactId));
      this.refillTimers.delete(artifactId);
      const waiting = this.pools.get(artifactId);
      if (waiting) this.releaseWaiters(waiting);
      await this.filling.get(artifactId)?.catch(() => { /* a failed fill was logged by the loop */ });
      const list = this.pools.get(artifactId)?.ready ?? [];
      this.pools.delete(artifactId);
      this.templates.delete(artifactId);
      await Promise.all(list.map((inst) => this.destroy(inst)));
    } finally {
      this.draining.delete(artifactId);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.shrinkTimer);
    this.abort.abort(new Error('warm pool closing'));
    for (const t of [...this.retryTimers.values(), ...this.refillTimers.values()]) clearTimeout(t);
    for (const p of this.pools.values()) this.releaseWaiters(p);
    await Promise.allSettled([...this.filling.values()]);
    const all = this.instances();
    this.pools.clear();
    await Promise.all(all.map((inst) => this.destroy(inst)));
  }

  private pool(artifactId: string): ArtifactPool {
    let p = this.pools.get(artifactId);
    if (!p) {
      p = { ready: [], target: Math.min(this.d.max, Math.max(this.d.size, this.d.initial ?? this.d.size)), starting: 0, hits: 0, misses: 0, lastHandOut: Date.now(), waiters: [] };
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
        // A free slot is taken at once, so that a create's miss sees this start as under way.
        let release = this.slots.tryAcquire();
        if (!release) {
          try {
            release = await this.slots.acquire(this.abort.signal);
          } catch {
            return; // the pool is closing: nothing was started
          }
          if (failed || !this.wantsMore(artifactId, p)) { release(); return; }
        }
        p.starting++;
        let inst: Instance;
        try {
          inst = await this.d.start(artifactId, this.abort.signal);
        } catch (err) {
          if (this.closed) return;
          failed = true;
          this.releaseWaiters(p);
          this.d.logger.warn({ err, artifactId }, 'warm sandbox start failed; retrying later');
          clearTimeout(this.retryTimers.get(artifactId));
          this.retryTimers.set(artifactId, setTimeout(() => { this.retryTimers.delete(artifactId); this.fill(artifactId); }, this.d.retryMs ?? 30_000).unref());
          return;
        } finally {
          p.starting--;
          release();
        }
        if (this.closed || this.draining.has(artifactId) || this.pools.get(artifactId) !== p) {
          await this.destroy(inst);
          return;
        }
        const waiter = p.waiters.shift();
        if (waiter) waiter.give(inst);
        else p.ready.push(inst);
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
