import { after, before, test } from 'node:test';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { RedisCoordination, coordinationFor } from './redis-coordination.ts';
import { MemoryCoordination } from './memory-coordination.ts';
import { coordinationContract } from './redis-coordination.contract.ts';
import { startRedisServer, type TestRedis } from './redis-coordination-test-server.ts';
import type { Coordination } from './coordination.ts';

let redis: TestRedis;
const opened: Coordination[] = [];
const open = (prefix = 'svctest:') => {
  const c = new RedisCoordination({ host: redis.host, port: redis.port, prefix });
  opened.push(c);
  return c;
};

before(async () => { redis = await startRedisServer(); });
after(async () => {
  await Promise.all(opened.map((c) => c.close()));
  await redis.stop();
});

coordinationContract({
  // Two connections stand for two processes sharing one Redis.
  pair: async () => [open(), open()],
  settle: (c) => (c as RedisCoordination).subscriptionsReady(),
});

test('prefixes keep two platforms on one Redis apart', async () => {
  const a = open('one:');
  const b = open('two:');
  assert.equal(await a.acquireLease('leader', 'x', 1_000), true);
  assert.equal(await b.acquireLease('leader', 'y', 1_000), true);
  await a.kvSet('k', 'a');
  assert.equal(await b.kvGet('k'), null);
});

test('coordinationFor picks Redis only when a host is configured', async () => {
  const mem = coordinationFor({ host: '', port: 6379, password: '', db: 0, tls: false });
  assert.ok(mem instanceof MemoryCoordination);
  const red = coordinationFor({ host: redis.host, port: redis.port, password: '', db: 0, tls: false }, { prefix: 'cf:' });
  opened.push(red);
  assert.ok(red instanceof RedisCoordination);
  await red.kvSet('k', 'v');
  assert.equal(await red.kvGet('k'), 'v');
});

test('lease expiry is decided by Redis, nothing is cached locally', async () => {
  const a = open();
  assert.equal(await a.acquireLease('ttl-check', 'x', 100), true);
  await new Promise((r) => setTimeout(r, 180));
  assert.equal(await a.leaseHolder('ttl-check'), null);
});

/**
 * redis.tls against the TLS port of scripts/test-services.sh's Redis. Node reads
 * NODE_EXTRA_CA_CERTS once at start, so each case runs in a process of its own.
 */
const TLS_CA = process.env.SVC_TEST_TLS_CA;
const TLS_PORT = process.env.SVC_TEST_REDIS_TLS_PORT;
test('redis.tls: coordination over TLS, the server checked against the CA NODE_EXTRA_CA_CERTS names; refused without it or for another name',
  { skip: TLS_CA && TLS_PORT ? false : process.env.SVC_TEST_REQUIRE_ALL_DBS === '1' ? false : 'SVC_TEST_REDIS_TLS_PORT not set (run scripts/test-services.sh start)' }, async () => {
    assert.ok(TLS_CA && TLS_PORT, 'SVC_TEST_TLS_CA and SVC_TEST_REDIS_TLS_PORT are set by scripts/test-services.sh');
    const roundTrip = (o: { tls: boolean; trust?: string; host?: string }) => {
      const cfg = { host: o.host ?? '127.0.0.1', port: Number(TLS_PORT), password: '', db: 0, tls: o.tls };
      const script = `
        import { coordinationFor } from ${JSON.stringify(fileURLToPath(new URL('./redis-coordination.ts', import.meta.url)))};
        const reasons = [];
        const logger = { warn: (o) => reasons.push(o.err) };
        const c = coordinationFor(${JSON.stringify(cfg)}, { prefix: 'tls-test:', logger });
        try { await c.kvSet('k', 'over tls', 5000); console.log('got:' + await c.kvGet('k')); }
        catch (err) { console.log('error:' + err.message + ' logged:' + [...new Set(reasons)].join('; ')); } finally { await c.close(); }`;
      const env: NodeJS.ProcessEnv = { ...process.env, NODE_EXTRA_CA_CERTS: o.trust };
      if (!o.trust) delete env.NODE_EXTRA_CA_CERTS;
      return new Promise<string>((resolve, reject) => execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { env, timeout: 30_000 }, (err, stdout, stderr) => {
        const line = stdout.split('\n').find((l) => l.startsWith('got:') || l.startsWith('error:'));
        if (line) resolve(line);
        else reject(new Error(`no answer from the child: ${err?.message ?? ''} ${stderr}`));
      }));
    };
    assert.equal(await roundTrip({ tls: true, trust: TLS_CA }), 'got:over tls');
    assert.match(await roundTrip({ tls: true }), /^error:.* logged:.*(self[- ]signed|unable to (get|verify))/i, 'an unknown CA is refused, and the log says why');
    assert.match(await roundTrip({ tls: false, trust: TLS_CA }), /^error:/, 'plain TCP to the TLS port gets nowhere');
    // The certificate names 127.0.0.1 and localhost; another name for the same server is refused.
    assert.match(await roundTrip({ tls: true, trust: TLS_CA, host: '127.1' }), /^error:.* logged:.*(altnames|does not match)/i);
  });
