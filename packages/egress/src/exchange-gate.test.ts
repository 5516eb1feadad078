import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import type { EgressFallback } from '@svc/contracts/egress';
import type { AuditRecord } from './audit-log.ts';
import { DnsCache } from './dns-cache.ts';
import { ExchangeGate, type Verdict } from './exchange-gate.ts';
import { PlaceholderResolver } from './placeholders.ts';
import { PolicyStore } from './policy-store.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';
import { Upstreams } from './upstream.ts';

const SANDBOX = '10.0.0.2';
const conn: ConnectionFacts = { scheme: 'http', sandboxIp: SANDBOX, tlsVersion: '', cipher: '' };

/** A gate's dependencies with a policy of no rules and `fallback`, and a resolver that never answers but counts. */
function setup(fallback: EgressFallback) {
  const asked: string[] = [];
  const dns = new DnsCache((host) => { asked.push(host); return new Promise<string>(() => { /* a silent nameserver */ }); }, 10_000, undefined,
    { timeoutMs: 50, failureTtlMs: 5_000, maxInFlightPerOwner: 4 });
  const upstreams = new Upstreams({ connectTimeoutMs: 1_000, ioTimeoutMs: 1_000, dns });
  const store = new PolicyStore();
  store.put({ sandboxId: 'sbx', address: SANDBOX, rules: [], fallback });
  store.markReady();
  const records: AuditRecord[] = [];
  const deps: ProxyDeps = { store, placeholders: new PlaceholderResolver(undefined), audit: { write: (r) => records.push(r) }, upstreams, logger: silentLogger(), viaFor: () => undefined };
  const decide = (host: string) => new ExchangeGate(deps, conn, 'GET', '/').decide({ scheme: 'http', port: 80, host, method: 'GET', path: '/' });
  return { asked, records, decide, close: () => upstreams.close() };
}

test('a fallback that can allow no address denies without looking the Host up', async () => {
  for (const fallback of [
    { allowInternetAccess: false, allowOut: [], denyOut: [] },
    { allowInternetAccess: true, allowOut: [], denyOut: ['0.0.0.0/0'] },
  ]) {
    const { asked, records, decide, close } = setup(fallback);
    try {
      const verdict = decide('x1.attacker-ns.example');
      assert.ok(!(verdict instanceof Promise), 'decided at once');
      assert.deepEqual(verdict, { allowed: false, status: 403, message: `egress denied: no rule matched and ${fallback.allowInternetAccess ? 'allow_out is empty and deny_out 0.0.0.0/0 holds every address' : 'allow_out is empty and internet access is off'}` });
      assert.deepEqual(asked, []);
      assert.equal((records[0] as { type?: string }).type, 'security_event');
    } finally {
      close();
    }
  }
});

test('a sandbox\'s lookups are capped: the fifth silent name is a 503 with no lookup; each silent one a 502 at the timeout', async () => {
  const { asked, decide, close } = setup({ allowInternetAccess: true, allowOut: [], denyOut: [] });
  try {
    const first = [1, 2, 3, 4].map((i) => decide(`x${i}.attacker-ns.example`));
    const fifth = await decide('x5.attacker-ns.example');
    assert.deepEqual({ ...fifth, message: '' }, { allowed: false, status: 503, message: '' });
    assert.match((fifth as Extract<Verdict, { allowed: false }>).message, /x5\.attacker-ns\.example was not looked up/);
    assert.equal(asked.length, 4);
    for (const v of await Promise.all(first)) assert.equal((v as Extract<Verdict, { allowed: false }>).status, 502);
  } finally {
    close();
  }
});

test('an inject goes only over https unless its rule names http: a rule without a scheme and an E2B transform refuse plain http with a 403, nothing injected', async () => {
  const store = new PolicyStore();
  const inject = [{ header: 'Authorization', format: 'Bearer ${SECRET}', secret: 'sk-cleartext-0123456789' }];
  store.put({
    sandboxId: 'sbx', address: SANDBOX,
    rules: [
      { name: 'any-scheme', match: { host: 'api.openai.test' }, action: { allow: true, inject } },
      { name: 'named-http', match: { scheme: 'http', host: 'legacy.test' }, action: { allow: true, inject } },
    ],
    fallback: { allowInternetAccess: true, allowOut: [], denyOut: [] },
    transforms: [{ host: 'transform.test', inject }],
  });
  store.markReady();
  const upstreams = new Upstreams({ connectTimeoutMs: 1_000, ioTimeoutMs: 1_000, resolve: { 'api.openai.test': '93.184.216.34', 'legacy.test': '93.184.216.34', 'transform.test': '93.184.216.34' } });
  const records: AuditRecord[] = [];
  const deps: ProxyDeps = { store, placeholders: new PlaceholderResolver(undefined), audit: { write: (r) => records.push(r) }, upstreams, logger: silentLogger(), viaFor: () => undefined };
  const decide = async (scheme: 'http' | 'https', host: string) => {
    const c: ConnectionFacts = scheme === 'https' ? { scheme, sandboxIp: SANDBOX, sni: host, certName: host, tlsVersion: 'TLSv1.3', cipher: 'x' } : conn;
    return await new ExchangeGate(deps, c, 'GET', '/').decide({ scheme, port: scheme === 'https' ? 443 : 80, host, method: 'GET', path: '/v1/models' });
  };
  try {
    for (const [host, source] of [['api.openai.test', 'any-scheme'], ['transform.test', 'transform transform.test']]) {
      const v = await decide('http', host);
      assert.deepEqual(v, { allowed: false, status: 403, message: `egress denied: ${source} injects credentials only over https, and this request to ${host} is plain http; send it to https://${host}/ (or name scheme http in the rule to send the credential in cleartext)` });
      const https = await decide('https', host);
      assert.equal(https.allowed, true, `${host} over https`);
      assert.deepEqual((https as Extract<Verdict, { allowed: true }>).inject.map((h) => h.name), ['Authorization']);
    }
    const named = await decide('http', 'legacy.test');
    assert.equal(named.allowed, true, 'a rule that names http injects over http, as its author asked');
    const events = records.filter((r) => 'reason' in r && r.reason === 'inject_over_http');
    assert.equal(events.length, 2);
  } finally {
    upstreams.close();
  }
});
