import { Redis, type RedisOptions } from 'ioredis';
import { checkLockName, type Coordination } from './coordination.ts';

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export interface RedisCoordinationOptions extends RedisOptions {
  /** Prefix for every key and channel, so several platforms can share one Redis. */
  prefix?: string;
}

/** Coordination on Redis, for several master, proxy and lifecycle-manager replicas. */
export class RedisCoordination implements Coordination {
  private readonly cmd: Redis;
  private sub: Redis | undefined;
  private readonly prefix: string;
  private readonly handlers = new Map<string, Set<(e: unknown) => void>>();

  constructor(opts: RedisCoordinationOptions) {
    const { prefix = 'svc:', ...redisOpts } = opts;
    this.prefix = prefix;
    this.cmd = new Redis({ lazyConnect: false, maxRetriesPerRequest: 2, ...redisOpts });
    this.cmd.on('error', () => { /* reconnects by itself; callers see command errors */ });
    this.redisOpts = redisOpts;
  }
  private readonly redisOpts: RedisOptions;

  private k(name: string) { return this.prefix + name; }

  async acquireLease(name: string, holder: string, ttlMs: number) {
    checkLockName(name);
    const ok = await this.cmd.set(this.k(name), holder, 'PX', ttlMs, 'NX');
    if (ok === 'OK') return true;
    return (await this.cmd.eval(RENEW, 1, this.k(name), holder, String(ttlMs))) === 1;
  }
  async releaseLease(name: string, holder: string) { await this.cmd.eval(RELEASE, 1, this.k(name), holder); }
  async leaseHolder(name: string) { return this.cmd.get(this.k(name)); }
  async tryLock(name: string, holder: string, ttlMs: number) {
    checkLockName(name);
    return (await this.cmd.set(this.k(name), holder, 'PX', ttlMs, 'NX')) === 'OK';
  }
  async unlock(name: string, holder: string) { await this.cmd.eval(RELEASE, 1, this.k(name), holder); }

  async publish(topic: string, event: unknown) {
    await this.cmd.publish(this.k(topic), JSON.stringify(event));
  }
  subscribe(topic: string, handler: (event: unknown) => void) {
    const channel = this.k(topic);
    if (!this.sub) {
      this.sub = new Redis({ ...this.redisOpts, maxRetriesPerRequest: null });
      this.sub.on('error', () => {});
      this.sub.on('message', (ch: string, msg: string) => {
        let ev: unknown;
        try { ev = JSON.parse(msg); } catch { return; }
        for (const h of this.handlers.get(ch) ?? []) h(ev);
      });
    }
    let set = this.handlers.get(channel);
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
      void this.sub.subscribe(channel);
    }
    set.add(handler);
    return () => {
      set!.delete(handler);
      if (set!.size === 0) { this.handlers.delete(channel); void this.sub?.unsubscribe(channel); }
    };
  }

  async kvSet(key: string, value: string, ttlMs?: number) {
    if (ttlMs) await this.cmd.set(this.k(key), value, 'PX', ttlMs);
    else await this.cmd.set(this.k(key), value);
  }
  async kvGet(key: string) { return this.cmd.get(this.k(key)); }
  async kvDel(key: string) { await this.cmd.del(this.k(key)); }
  async close() {
    this.sub?.disconnect();
    this.cmd.disconnect();
  }
}
