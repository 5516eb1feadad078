import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DnsCache } from './dns-cache.ts';
import { UpstreamError, Upstreams } from './upstream.ts';

/** Upstreams whose DNS answers from a table, counting its lookups. */
function upstreams(resolve: Record<string, string>, table: Record<string, string> = {}, lookup?: (host: string) => Promise<string>) {
  const asked: string[] = [];
  const dns = new DnsCache(lookup ?? (async (host) => {
    asked.push(host);
    if (Object.hasOwn(table, host)) return table[host];
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  }), 10_000, undefined, { timeoutMs: 30, failureTtlMs: 5_000, maxInFlightPerOwner: 1 });
  return { u: new Upstreams({ resolve, connectTimeoutMs: 1_000, ioTimeoutMs: 1_000, dns }), asked };
}

test('egress.resolve overrides are the operator\'s names only: a Host of constructor or __proto__ is no address', async () => {
  const { u, asked } = upstreams({ 'api.example.test': '10.0.0.9' });
  try {
    assert.equal(u.knownAddress('api.example.test'), '10.0.0.9');
    assert.equal(u.knownAddress('API.example.test'), '10.0.0.9');
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
      assert.equal(u.knownAddress(name), undefined, name);
      await assert.rejects(u.resolve(name), (err: unknown) => err instanceof UpstreamError && err.status === 502 && err.failure === 'dns', name);
    }
    assert.deepEqual(asked, ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'], 'each went to DNS, as any unknown name');
  } finally {
    u.close();
  }
});

test('an override named __proto__ by the operator is an override like any other', () => {
  const { u } = upstreams(JSON.parse('{"__proto__": "10.0.0.7"}') as Record<string, string>);
  try {
    assert.equal(u.knownAddress('__proto__'), '10.0.0.7');
  } finally {
    u.close();
  }
});

test('a lookup that does not answer is a 502; one past the sandbox\'s share of running lookups a 503, looked up by nobody', async () => {
  const { u } = upstreams({}, {}, () => new Promise<string>(() => { /* a silent nameserver */ }));
  try {
    await assert.rejects(u.resolve('silent.attacker-ns.example', '10.0.0.2'), (err: unknown) => err instanceof UpstreamError && err.status === 502 && /silent\.attacker-ns\.example \(no answer within 0\.03 s\)/.test(err.message));
    await assert.rejects(u.resolve('other.attacker-ns.example', '10.0.0.2'), (err: unknown) => err instanceof UpstreamError && err.status === 503 && err.failure === 'dns_busy' && /other\.attacker-ns\.example was not looked up/.test(err.message));
  } finally {
    u.close();
  }
});
