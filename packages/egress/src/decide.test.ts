import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EgressRule, SandboxEgressPolicy } from '@svc/contracts/egress';
import { decide, decideByAddress, fallbackAllowsNothing, pathMatches, transformFor, type RequestFacts } from './decide.ts';

const policy = (rules: EgressRule[], fallback?: SandboxEgressPolicy['fallback']): SandboxEgressPolicy => ({ sandboxId: 'sbx', address: '10.0.0.2', rules, ...(fallback ? { fallback } : {}) });
const facts = (f: Partial<RequestFacts> = {}): RequestFacts => ({ scheme: 'https', port: 443, sni: 'api.example.com', host: 'api.example.com', method: 'GET', path: '/v1/items?x=1', ...f });
const allow = (name: string, match: EgressRule['match'], extra: Partial<EgressRule['action']> = {}): EgressRule => ({ name, match, action: { allow: true, ...extra } });
const deny = (name: string, match: EgressRule['match'], extra: Partial<EgressRule['action']> = {}): EgressRule => ({ name, match, action: { allow: false, ...extra } });
const verdictOf = (p: SandboxEgressPolicy, f: RequestFacts) => {
  const d = decide(p, f);
  return 'rule' in d ? `${d.verdict}:${d.rule.name}` : d.verdict;
};

test('first match wins; no match is default deny', () => {
  const p = policy([allow('a', { host: 'api.example.com' }), deny('b', { host: 'api.example.com' })]);
  assert.equal(verdictOf(p, facts()), 'allow:a');
  assert.equal(verdictOf(p, facts({ host: 'other.example.com' })), 'default_deny');
  assert.equal(verdictOf(policy([]), facts()), 'default_deny');
});

test('an allow exception listed before a broad deny', () => {
  const p = policy([allow('exception', { host: 'api.example.com', path: '/v1/public/*' }), deny('broad', { host: '*.example.com' }), allow('rest', {})]);
  assert.equal(verdictOf(p, facts({ path: '/v1/public/x' })), 'allow:exception');
  assert.equal(verdictOf(p, facts({ path: '/v1/private' })), 'deny:broad');
  assert.equal(verdictOf(p, facts({ host: 'example.com', sni: 'example.com' })), 'allow:rest');
});

test('all match fields are ANDed; absent fields are wildcards; method is an OR list', () => {
  const p = policy([allow('a', { scheme: 'https', host: 'api.example.com', method: ['GET', 'HEAD'], path: '/v1/items?x=1' })]);
  assert.equal(verdictOf(p, facts()), 'allow:a');
  assert.equal(verdictOf(p, facts({ method: 'head' })), 'allow:a');
  assert.equal(verdictOf(p, facts({ method: 'POST' })), 'default_deny');
  assert.equal(verdictOf(p, facts({ path: '/v1/items' })), 'default_deny');
  assert.equal(verdictOf(p, facts({ scheme: 'http', port: 80, sni: undefined })), 'default_deny');
  assert.equal(verdictOf(policy([allow('any', {})]), facts({ method: 'DELETE', path: '/anything' })), 'allow:any');
});

test('scheme compares case-insensitively', () => {
  const p = policy([allow('a', { scheme: 'HTTPS' as 'https' })]);
  assert.equal(verdictOf(p, facts()), 'allow:a');
});

test('ports: a rule port needs equality; an allow without port covers only the defaults; a deny without port any port', () => {
  const withPort = policy([allow('p', { scheme: 'https', port: 8443 })]);
  assert.equal(verdictOf(withPort, facts({ port: 8443 })), 'allow:p');
  assert.equal(verdictOf(withPort, facts({ port: 443 })), 'default_deny');

  const noPort = policy([allow('a', { host: 'api.example.com' })]);
  assert.equal(verdictOf(noPort, facts({ port: 443 })), 'allow:a');
  assert.equal(verdictOf(noPort, facts({ scheme: 'http', port: 80, sni: undefined })), 'allow:a');
  assert.equal(verdictOf(noPort, facts({ port: 8443 })), 'default_deny');
  assert.equal(verdictOf(noPort, facts({ scheme: 'http', port: 443, sni: undefined })), 'default_deny');

  const httpsOnly = policy([allow('s', { scheme: 'https' })]);
  assert.equal(verdictOf(httpsOnly, facts({ port: 80 })), 'default_deny');

  const broadDeny = policy([deny('d', { host: 'api.example.com' }), allow('all', { scheme: 'https', port: 9000 })]);
  assert.equal(verdictOf(broadDeny, facts({ port: 9000 })), 'deny:d');
});

test('a deny rule naming an SNI holds on the Host too: leaving SNI out, or sending an allowed one, does not pass it', () => {
  const p = policy([deny('no-evil', { sni: 'evil.example.net' }), allow('all', {})]);
  assert.equal(verdictOf(p, facts({ sni: 'evil.example.net', host: 'evil.example.net' })), 'deny:no-evil');
  assert.equal(verdictOf(p, facts({ sni: undefined, host: 'evil.example.net' })), 'deny:no-evil');
  assert.equal(verdictOf(p, facts({ sni: 'api.example.com', host: 'evil.example.net' })), 'deny:no-evil');
  assert.equal(verdictOf(p, facts({ sni: 'evil.example.net', host: 'api.example.com' })), 'deny:no-evil');
  assert.equal(verdictOf(p, facts({ scheme: 'http', port: 80, sni: undefined, host: 'evil.example.net' })), 'deny:no-evil');
  assert.equal(verdictOf(p, facts()), 'allow:all');
});

test('sni matches only a present SNI; host and SNI wildcards never match the apex', () => {
  const p = policy([allow('s', { sni: '*.example.com' })]);
  assert.equal(verdictOf(p, facts()), 'allow:s');
  assert.equal(verdictOf(p, facts({ sni: undefined })), 'default_deny');
  assert.equal(verdictOf(p, facts({ sni: 'example.com' })), 'default_deny');
  const h = policy([allow('h', { host: '*.example.com' })]);
  assert.equal(verdictOf(h, facts({ host: 'example.com' })), 'default_deny');
  assert.equal(verdictOf(h, facts({ host: 'deep.api.example.com' })), 'allow:h');
});

test('paths: exact (the path whatever the query, unless the pattern names one), or a prefix with one trailing *', () => {
  assert.equal(pathMatches('/v1/items', '/v1/items'), true);
  assert.equal(pathMatches('/v1/items', '/v1/items?x=1'), true, 'a deny rule for /admin holds for /admin?x');
  assert.equal(pathMatches('/v1/items', '/v1/items/1'), false);
  assert.equal(pathMatches('/v1/items?x=1', '/v1/items?x=1'), true);
  assert.equal(pathMatches('/v1/items?x=1', '/v1/items?x=2'), false);
  assert.equal(pathMatches('/v1/*', '/v1/items?x=1'), true);
  assert.equal(pathMatches('/v1/*', '/v2'), false);
  assert.equal(pathMatches('*', '/anything'), true);
});

const reasonOf = (d: ReturnType<typeof decide>) => (d.verdict === 'deny' ? d.reason : d.verdict);

test('a deny rule that carries inject is a malformed deny', () => {
  const p = policy([deny('bad', {}, { inject: [{ header: 'X-Key', secret: 's3cret' }] })]);
  assert.equal(reasonOf(decide(p, facts())), 'malformed_rule');
  assert.equal(reasonOf(decide(policy([deny('plain', {})]), facts())), 'deny_rule');
});

test('no rule matched with a fallback: the address decides (allowOut, then denyOut, then internet access)', () => {
  const fallback = { allowInternetAccess: true, allowOut: ['10.1.0.0/16'], denyOut: ['10.0.0.0/8', '192.168.1.7'] };
  assert.equal(verdictOf(policy([], fallback), facts()), 'by_address');
  assert.equal(decideByAddress(fallback, '10.1.2.3').allow, true);
  assert.equal(decideByAddress(fallback, '10.2.0.1').allow, false);
  assert.equal(decideByAddress(fallback, '192.168.1.7').allow, false);
  assert.equal(decideByAddress(fallback, '192.168.1.8').allow, true);
  assert.equal(decideByAddress({ ...fallback, allowInternetAccess: false }, '8.8.8.8').allow, false);
  assert.equal(decideByAddress({ allowInternetAccess: false, allowOut: ['0.0.0.0/0'], denyOut: [] }, '200.1.1.1').allow, true);
  // Boundaries of the unsigned arithmetic: a /1 of the upper half, a /32 at the top.
  assert.equal(decideByAddress({ allowInternetAccess: false, allowOut: ['128.0.0.0/1'], denyOut: [] }, '255.255.255.255').allow, true);
  assert.equal(decideByAddress({ allowInternetAccess: false, allowOut: ['128.0.0.0/1'], denyOut: [] }, '127.255.255.255').allow, false);
  assert.equal(decideByAddress({ allowInternetAccess: false, allowOut: ['255.255.255.255'], denyOut: [] }, '255.255.255.255').allow, true);
});

test('lists are parsed once per policy: a replaced policy is decided by its new lists, never the old ones', () => {
  const first = { allowInternetAccess: false, allowOut: ['10.1.0.0/16'], denyOut: [] };
  assert.equal(decideByAddress(first, '10.1.2.3').allow, true);
  const replaced = { ...first, allowOut: ['10.2.0.0/16'] };
  assert.equal(decideByAddress(replaced, '10.1.2.3').allow, false);
  assert.equal(decideByAddress(replaced, '10.2.2.3').allow, true);
  assert.equal(decideByAddress(first, '10.1.2.3').allow, true);
  assert.equal(fallbackAllowsNothing({ allowInternetAccess: true, allowOut: [], denyOut: ['10.0.0.0/8'] }), undefined);
  assert.match(fallbackAllowsNothing({ allowInternetAccess: true, allowOut: [], denyOut: ['10.0.0.0/8', '0.0.0.0/0'] }) ?? '', /deny_out 0\.0\.0\.0\/0 holds every address/);
});

test('transformFor: the first transform whose host pattern matches', () => {
  const p: SandboxEgressPolicy = { ...policy([]), transforms: [
    { host: 'api.example.com', inject: [{ header: 'X-A', secret: 'a' }] },
    { host: '*.example.com', inject: [{ header: 'X-B', secret: 'b' }] },
  ] };
  assert.equal(transformFor(p, 'api.example.com')?.inject[0].header, 'X-A');
  assert.equal(transformFor(p, 'x.api.example.com')?.inject[0].header, 'X-B');
  assert.equal(transformFor(p, 'example.com'), undefined);
  assert.equal(transformFor(policy([]), 'api.example.com'), undefined);
});

test('paths: rules see runs of / as one, so //admin cannot pass a deny for /admin', () => {
  const p = policy([deny('admin', { path: '/admin*' }), allow('public', { path: '/v1/public/*' })]);
  assert.equal(verdictOf(p, facts({ path: '//admin' })), 'deny:admin');
  assert.equal(verdictOf(p, facts({ path: '/admin//keys' })), 'deny:admin');
  assert.equal(verdictOf(p, facts({ path: '/v1//public///x?r=//y' })), 'allow:public');
  assert.equal(verdictOf(p, facts({ path: '/v2//public/x' })), 'default_deny');
});

test('an opaque tunnel (CONNECT) is refused by a deny rule whose scheme, port and host match, whatever path, method or SNI it names', () => {
  const connect = (f: Partial<RequestFacts> = {}) => facts({ method: 'CONNECT', path: '', sni: undefined, opaque: true, ...f });
  const p = policy([
    deny('no-admin', { host: 'api.example.com', path: '/admin*' }),
    deny('no-delete', { host: 'api.example.com', method: ['DELETE'] }),
    deny('no-sni', { host: 'other.example.com', sni: 'evil.example.net' }),
    deny('plain-only', { scheme: 'http', host: 'plain.example.com', path: '/x' }),
    allow('api', { host: '*.example.com' }),
  ]);
  // The tunnel could carry `DELETE /admin`: the first deny rule for the host holds.
  assert.equal(verdictOf(p, connect()), 'deny:no-admin');
  assert.equal(verdictOf(p, connect({ host: 'other.example.com' })), 'deny:no-sni');
  // A deny rule for another scheme, or another host, does not.
  assert.equal(verdictOf(p, connect({ host: 'plain.example.com' })), 'allow:api');
  assert.equal(verdictOf(p, connect({ host: 'fine.example.com' })), 'allow:api');
  // Requests are still decided on what they are: GET /v1 passes the narrow deny rules.
  assert.equal(verdictOf(p, facts()), 'allow:api');
  assert.equal(verdictOf(p, facts({ path: '/admin/x' })), 'deny:no-admin');
  // Allow rules keep their conditions: one with a path never allows a tunnel.
  assert.equal(verdictOf(policy([allow('narrow', { host: 'api.example.com', path: '/v1/*' })]), connect()), 'default_deny');
});

test('deny rules compare paths leniently: case, a trailing /, ;params, %2F or \\ cannot pass them; allow rules stay exact', () => {
  const p = policy([
    deny('no-admin', { host: 'api.example.com', path: '/admin' }),
    deny('no-internal', { host: 'api.example.com', path: '/internal/*' }),
    deny('no-project', { host: 'api.example.com', path: '/api/v4/projects/group%2Fsecret' }),
    allow('api', { host: 'api.example.com' }),
  ]);
  for (const path of ['/admin', '/ADMIN', '/Admin?x=1', '/admin/', '/admin/?x', '/admin;a=b', '/admin;a=b/', '//admin//']) {
    assert.equal(verdictOf(p, facts({ path })), 'deny:no-admin', path);
  }
  for (const path of ['/internal/keys', '/Internal/keys', '/INTERNAL/KEYS', '/internal;x/keys', '/internal%2Fkeys', '/internal%2fkeys', '/internal\\keys', '/internal%5Ckeys']) {
    assert.equal(verdictOf(p, facts({ path })), 'deny:no-internal', path);
  }
  assert.equal(verdictOf(p, facts({ path: '/api/v4/projects/group%2Fsecret' })), 'deny:no-project');
  assert.equal(verdictOf(p, facts({ path: '/api/v4/projects/group/secret' })), 'deny:no-project');
  for (const path of ['/admins', '/admin/x', '/internal', '/v1/admin']) assert.equal(verdictOf(p, facts({ path })), 'allow:api', path);
  // An allow rule's path is matched exactly: /V1/public is not under /v1/public/*.
  const allowOnly = policy([allow('public', { path: '/v1/public/*' })]);
  assert.equal(verdictOf(allowOnly, facts({ path: '/v1/public/x' })), 'allow:public');
  assert.equal(verdictOf(allowOnly, facts({ path: '/V1/public/x' })), 'default_deny');
  assert.equal(verdictOf(allowOnly, facts({ path: '/v1/public;x/y' })), 'default_deny');
});

test('an opaque tunnel is refused only by deny rules naming its host (or, naming no host, an SNI that is its host)', () => {
  const connect = (f: Partial<RequestFacts> = {}) => facts({ method: 'CONNECT', path: '', sni: undefined, opaque: true, ...f });
  // A deny rule naming no host held for every CONNECT on 2026-12-01: one for DELETE ahead of an
  // allow-all refused tunnels to every host.
  const methodOnly = policy([deny('no-delete', { method: ['DELETE'] }), deny('no-admin', { path: '/admin*' }), allow('all', {})]);
  assert.equal(verdictOf(methodOnly, connect()), 'allow:all');
  assert.equal(verdictOf(methodOnly, connect({ host: 'anything.example.org' })), 'allow:all');
  assert.equal(verdictOf(methodOnly, facts({ method: 'DELETE' })), 'deny:no-delete');
  // A host and a path: the tunnel to that host could carry the path.
  const hostPath = policy([deny('no-admin', { host: 'api.example.com', path: '/admin*' }), allow('all', {})]);
  assert.equal(verdictOf(hostPath, connect()), 'deny:no-admin');
  assert.equal(verdictOf(hostPath, connect({ host: 'other.example.com' })), 'allow:all');
  // An SNI only: the CONNECT host is taken as the tunnel's SNI.
  const sniOnly = policy([deny('no-evil', { sni: 'evil.example.net' }), allow('all', {})]);
  assert.equal(verdictOf(sniOnly, connect({ host: 'evil.example.net' })), 'deny:no-evil');
  assert.equal(verdictOf(sniOnly, connect({ host: 'api.example.com' })), 'allow:all');
  // A deny rule with no condition still refuses everything, tunnels included.
  assert.equal(verdictOf(policy([deny('none', {}), allow('all', {})]), connect()), 'deny:none');
});

test('a deny of a tunnel says how the rule held for it (the refusal\'s why: connect-refusal.ts); a request\'s deny does not', () => {
  const connect = (f: Partial<RequestFacts> = {}) => facts({ method: 'CONNECT', path: '', sni: undefined, opaque: true, ...f });
  const tunnelOf = (rules: EgressRule[], f: RequestFacts) => {
    const d = decide(policy(rules), f);
    return d.verdict === 'deny' ? d.tunnel : d.verdict;
  };
  assert.equal(tunnelOf([deny('h', { host: 'api.example.com', path: '/admin*' })], connect()), 'host');
  assert.equal(tunnelOf([deny('s', { sni: 'api.example.com' })], connect()), 'sni');
  assert.equal(tunnelOf([deny('c', { method: ['CONNECT'] })], connect()), 'as_sent');
  assert.equal(tunnelOf([deny('h', { host: 'api.example.com' })], facts()), undefined);
});
