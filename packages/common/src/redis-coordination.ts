import { Redis, type RedisOptions } from 'ioredis';
import { checkLockName, type Coordination } from './coordination.ts';
import type { RedisConfig } from './config-types.ts';
import type { Logger } from './log.ts';
import { MemoryCoordination } from './memory-coordination.ts';

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export interface RedisCoordinationOptions extends RedisOptions {
  /** Prefix for every key and channel, so several platforms can share one Redis. */
  prefix?: string;
  /**
   * Told why a connection failed (a refused port, a certificate not trusted): once per distinct
   * reason until the connection is ready again. Commands fail with ioredis' retry message alone.
   */
  onConnectionError?: (err: Error, connection: 'commands' | 'subscriber') => void;
}

/** Coordination on Redis, for several master, proxy and lifecycle-manager replicas. */
export class RedisCoordination implements Coordination {
  private readonly cmd: Redis;
  private sub: Redis | undefined;
  private readonly prefix: string;
  private readonly redisOpts: RedisOptions;
  private readonly handlers = new Map<string, Set<(e: unknown) => void>>();
  private pendingSubscribes: Promise<unknown> = Promise.resolve();

  private readonly onConnectionError: RedisCoordinationOptions['onConnectionError'];

  constructor(opts: RedisCoordinationOptions) {
    const { prefix = 'svc:', onConnectionError, ...redisOpts } = opts;
    this.prefix = prefix;
    this.redisOpts = redisOpts;
    this.onConnectionError = onConnectionError;
    this.cmd = this.watched(new Redis({ lazyConnect: false, maxRetriesPerRequest: 2, ...redisOpts }), 'commands');
  }

  /** ioredis reconnects by itself; its errors go to onConnectionError, each reason once until ready. */
  private watched(conn: Redis, role: 'commands' | 'subscriber'): Redis {
    let told = '';
    conn.on('error', (err: Error) => {
      if (err.message === told) return;
      told = err.message;
      this.onConnectionError?.(err, role);
    });
    conn.on('ready', () => { told = ''; });
    return conn;
  }

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
    const sub = this.subscriber();
    let set = this.handlers.get(channel);
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
      this.pendingSubscribes = Promise.all([this.pendingSubscribes, sub.subscribe(channel).catch((err: Error) => { console.error(`redis coordination: subscribing to ${channel} failed: ${err.message}`); })]);
    }
    set.add(handler);
    return () => {
      const cur = this.handlers.get(channel);
      if (!cur) return;
      cur.delete(handler);
      if (cur.size === 0) {
        this.handlers.delete(channel);
        void sub.unsubscribe(channel).catch(() => { /* the connection is going away or gone: nothing is subscribed then either */ });
      }
    };
  }

  /** Resolves once every subscribe() so far is active on the server (publishes before that are lost). */
  async subscriptionsReady(): Promise<void> { await this.pendingSubscribes; }

  private subscriber(): Redis {
    if (this.sub) return this.sub;
    // A connection in subscriber mode can run no other command, hence a second one.
    const sub = this.watched(new Redis({ ...this.redisOpts, maxRetriesPerRequest: null }), 'subscriber');
    sub.on('message', (channel: string, msg: string) => {
      let event: unknown;
      try { event = JSON.parse(msg); } catch { return; }
      for (const h of this.handlers.get(channel) ?? []) {
        try { h(event); } catch { /* a throwing handler must not starve the others */ }
      }
    });
    this.sub = sub;
    return sub;
  }

  async kvSet(key: string, value: string, ttlMs?: number) {
    if (ttlMs) await this.cmd.set(this.k(key), value, 'PX', ttlMs);
    else await this.cmd.set(this.k(key), value);
  }
  async kvGet(key: string) { return this.cmd.get(this.k(key)); }
  async kvDel(key: string) { await this.cmd.del(this.k(key)); }

  async close() {
    this.handlers.clear();
    this.sub?.disconnect();
    // quit lets commands already sent (a lease release on shutdown) finish first.
    await this.cmd.quit().catch(() => this.cmd.disconnect());
  }
}

/** Redis-backed coordination when `redis.host` is set, in-process otherwise. */
export function coordinationFor(redis: RedisConfig, opts: { prefix?: string; logger?: Logger } = {}): Coordination {
  if (!redis.host) return new MemoryCoordination();
  return new RedisCoordination({
    host: redis.host,
    port: redis.port,
    password: redis.password || undefined,
    db: redis.db,
    // An empty options object: Node's default trust (system CAs and NODE_EXTRA_CA_CERTS) and a hostname check.
    tls: redis.tls ? {} : undefined,
    prefix: opts.prefix,
    onConnectionError: (err, connection) => opts.logger?.warn({ redis: `${redis.host}:${redis.port}`, tls: redis.tls, connection, err: err.message }, 'redis connection failed; retrying'),
  });
}
