import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcError } from '@svc/common';
import { planEgress, redactNetwork } from './egress-plan.ts';

const net = (o: { allowOut?: string[]; denyOut?: string[]; rules?: unknown }) => ({ allowOut: o.allowOut ?? [], denyOut: o.denyOut ?? [], rules: o.rules });

test('no rules and no host names: the proxy is not in the path', () => {
  assert.deepEqual(planEgress(net({ allowOut: ['1.1.1.1', '10.0.0.0/8'], denyOut: ['0.0.0.0/0'] }), true), { steer: [] });
});

test('rules (docs/egress.md, "Rules"): steered by their ports, checked, default deny (no fallback)', () => {
  const plan = planEgress(net({
    rules: [
      { name: 'a', match: { host: 'API.example.com', scheme: 'https', port: 8443 }, action: { allow: true } },
      { name: 'b', match: { host: 'x.com' }, action: { allow: false } },
    ],
  }), true);
  assert.deepEqual(plan.steer, [{ port: 80, scheme: 'http' }, { port: 443, scheme: 'https' }, { port: 8443, scheme: 'https' }]);
  assert.equal(plan.policy!.fallback, undefined);
  assert.equal(plan.policy!.rules[0].match.host, 'api.example.com');
});

test('E2B form: allowOut names become allow rules, transforms inject where allowOut names the host, else by the fallback', () => {
  const plan = planEgress(net({
    allowOut: ['*.example.com', '8.8.8.8'],
    denyOut: ['0.0.0.0/0'],
    rules: {
      'api.example.com': [{ transform: { headers: { Authorization: 'Bearer k' } } }],
      'other.org': [{ transform: { headers: { 'X-Key': 'v' } } }],
      '*.deep.example.com': [{ transform: { headers: { 'X-Deep': 'd' } } }],
    },
  }), false);
  const p = plan.policy!;
  assert.deepEqual(p.rules.map((r) => r.name), ['transform api.example.com', 'transform *.deep.example.com', 'allowOut *.example.com']);
  assert.deepEqual(p.rules[0].action.inject, [{ header: 'Authorization', secret: 'Bearer k' }]);
  assert.deepEqual(p.transforms, [{ host: 'other.org', inject: [{ header: 'X-Key', secret: 'v' }] }]);
  assert.deepEqual(p.fallback, { allowInternetAccess: false, allowOut: ['8.8.8.8/32'], denyOut: ['0.0.0.0/0'] });
  assert.deepEqual(plan.steer, [{ port: 80, scheme: 'http' }, { port: 443, scheme: 'https' }]);
});

test('a wildcard allowOut does not cover its apex', () => {
  const plan = planEgress(net({ allowOut: ['*.example.com'], rules: { 'example.com': [{ transform: { headers: { A: 'b' } } }] } }), true);
  assert.deepEqual(plan.policy!.transforms?.map((t) => t.host), ['example.com']);
});

test('bad input is a 400 that names the problem', () => {
  const bad = (o: Parameters<typeof net>[0], re: RegExp) => assert.throws(() => planEgress(net(o), true), (e: SvcError) => e.status === 400 && re.test(e.message));
  bad({ rules: [{ name: 'd', match: { host: 'a.com' }, action: { allow: false, inject: [{ header: 'A', secret: 's' }] } }] }, /deny rule cannot inject/);
  bad({ rules: [{ match: { host: 'a.com', port: 1 }, action: { allow: true } }] }, /port requires match.scheme/);
  bad({ rules: [{ match: { host: '10.0.0.0/8' }, action: { allow: true } }] }, /not a CIDR/);
  bad({ rules: { '*': [{ transform: { headers: { A: 'b' } } }] } }, /bare "\*"/);
  bad({ rules: { 'a.com': [{ transform: { headers: { Host: 'evil' } } }] } }, /cannot be Host/);
  bad({ rules: { 'a.com': [{ transform: { headers: { A: 'x\r\nB: y' } } }] } }, /line breaks/);
  bad({ allowOut: ['not a host!'] }, /allowOut\[0\]/);
  bad({ allowOut: Array.from({ length: 65 }, (_, i) => `h${i}.example.com`) }, /at most 64/);
  bad({
    rules: [
      { match: { host: 'a.com', scheme: 'http', port: 8000 }, action: { allow: true } },
      { match: { host: 'b.com', scheme: 'https', port: 8000 }, action: { allow: true } },
    ],
  }, /port 8000 is used as both http and https/);
  const nine = Array.from({ length: 9 }, (_, i) => ({ match: { host: 'a.com', scheme: 'https', port: 9000 + i }, action: { allow: true } }));
  bad({ rules: nine }, /more than 8/);
});

test('reads show no secret', () => {
  const list = redactNetwork({ allowOut: [], denyOut: [], allowPublicTraffic: true, rules: [{ name: 'x', match: {}, action: { allow: true, inject: [{ header: 'A', secret: 'S1' }] } }] });
  const map = redactNetwork({ allowOut: [], denyOut: [], allowPublicTraffic: true, rules: { 'a.com': [{ transform: { headers: { A: 'S2' } } }] } });
  assert.ok(!JSON.stringify(list).includes('S1') && JSON.stringify(list).includes('[redacted]'));
  assert.ok(!JSON.stringify(map).includes('S2') && JSON.stringify(map).includes('[redacted]'));
});
