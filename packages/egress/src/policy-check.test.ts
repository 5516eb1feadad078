import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EgressRuleError } from '@svc/contracts/egress';
import { checkPolicy } from './policy-check.ts';

test('a valid policy is normalized', () => {
  const p = checkPolicy({ sandboxId: 's', address: '10.0.0.2', rules: [{ match: { host: 'API.Example.com', scheme: 'HTTPS' }, action: { allow: true } }], fallback: { allowInternetAccess: false, allowOut: ['10.0.0.0/8', '1.1.1.1'], denyOut: [] } });
  assert.deepEqual(p.rules[0], { name: 'rule-0', match: { scheme: 'https', host: 'api.example.com' }, action: { allow: true } });
  assert.deepEqual(p.fallback?.allowOut, ['10.0.0.0/8', '1.1.1.1']);
});

test('transforms: host patterns and injects checked like a rule\'s', () => {
  const p = checkPolicy({ sandboxId: 's', address: '10.0.0.2', rules: [], transforms: [{ host: 'API.example.com', inject: [{ header: 'X-Key', secret: 'v' }] }] });
  assert.deepEqual(p.transforms, [{ host: 'api.example.com', inject: [{ header: 'X-Key', secret: 'v' }] }]);
  assert.throws(() => checkPolicy({ sandboxId: 's', address: '10.0.0.2', rules: [], transforms: [{ host: '10.0.0.0/8', inject: [] }] }), /CIDR/);
  assert.throws(() => checkPolicy({ sandboxId: 's', address: '10.0.0.2', rules: [], transforms: [{ host: 'a.com', inject: [{ header: 'Host', secret: 'v' }] }] }), /frames the request/);
  assert.throws(() => checkPolicy({ sandboxId: 's', address: '10.0.0.2', rules: [], transforms: {} }), /transforms must be a list/);
});

test('bad addresses, rules and fallback lists are EgressRuleErrors naming the field', () => {
  const base = { sandboxId: 's', address: '10.0.0.2', rules: [] };
  const cases: Array<[unknown, RegExp]> = [
    [null, /must be an object/],
    [{ ...base, address: '10.0.0.256' }, /address/],
    [{ ...base, address: '::1' }, /address/],
    [{ ...base, rules: [{ match: { host: '10.0.0.0/8' }, action: { allow: true } }] }, /CIDR/],
    [{ ...base, rules: [{ match: {}, action: { allow: false, inject: [{ header: 'X', secret: 'y' }] } }] }, /deny rule cannot inject/],
    [{ ...base, fallback: { allowInternetAccess: 'yes' } }, /fallback/],
    [{ ...base, fallback: { allowInternetAccess: true, allowOut: ['example.com'] } }, /allowOut\[0\]/],
    [{ ...base, fallback: { allowInternetAccess: true, denyOut: ['10.0.0.0/33'] } }, /denyOut\[0\]/],
  ];
  for (const [input, message] of cases) {
    assert.throws(() => checkPolicy(input), (err: unknown) => err instanceof EgressRuleError && message.test(err.message), JSON.stringify(input));
  }
});
