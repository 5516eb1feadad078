import { EventEmitter } from 'node:events';
import { checkLockName, type Coordination } from './coordination.ts';

interface Held { holder: string; expiresAt: number }

/** In-process coordination for the embedded, single-process mode. */
export class MemoryCoordination implements Coordination {
  private readonly held = new Map<string, Held>();
  private readonly kv = new Map<string, { value: string; expiresAt: number }>();
  private readonly bus = new EventEmitter();

  constructor() { this.bus.setMaxListeners(0); }

  private claim(name: string, holder: string, ttlMs: number, allowRenew: boolean): boolean {
    checkLockName(name);
    const now = Date.now();
    const cur = this.held.get(name);
    if (cur && cur.expiresAt > now && !(allowRenew && cur.holder === holder)) return false;
    this.held.set(name, { holder, expiresAt: now + ttlMs });
    return true;
  }

  private drop(name: string, holder: string): void {
    if (this.held.get(name)?.holder === holder) this.held.delete(name);
  }

  async acquireLease(name: string, holder: string, ttlMs: number) { return this.claim(name, holder, ttlMs, true); }
  async releaseLease(name: string, holder: string) { this.drop(name, holder); }
  async leaseHolder(name: string) {
    const cur = this.held.get(name);
    return cur && cur.expiresAt > Date.now() ? cur.holder : null;
  }
  async tryLock(name: string, holder: string, ttlMs: number) { return this.claim(name, holder, ttlMs, false); }
  async unlock(name: string, holder: string) { this.drop(name, holder); }

  async publish(topic: string, event: unknown) {
    // Delivered on a later tick, as a network bus would, so publishers never run handlers inline.
    setImmediate(() => this.bus.emit(topic, event));
  }
  subscribe(topic: string, handler: (event: unknown) => void) {
    // A throwing handler must not take the process down nor starve the other subscribers.
    const guarded = (event: unknown) => { try { handler(event); } catch { /* the handler's own problem */ } };
    this.bus.on(topic, guarded);
    return () => { this.bus.off(topic, guarded); };
  }

  async kvSet(key: string, value: string, ttlMs?: number) {
    this.kv.set(key, { value, expiresAt: ttlMs ? Date.now() + ttlMs : Number.POSITIVE_INFINITY });
  }
  async kvGet(key: string) {
    const e = this.kv.get(key);
    if (!e) return null;
    if (e.expiresAt <= Date.now()) { this.kv.delete(key); return null; }
    return e.value;
  }
  async kvDel(key: string) { this.kv.delete(key); }
  async close() { this.bus.removeAllListeners(); }
}
