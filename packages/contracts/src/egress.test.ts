/** The inject checks of checkEgressRules (docs/egress.md "Rules"): what a header's secret and format may hold. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkEgressRules, EgressRuleError, unsafeHeaderCharAt } from './egress.ts';

const withInject = (inject: Record<string, unknown>) => [{ name: 'api', match: { host: 'api.test' }, action: { allow: true, inject: [inject] } }];
const refusal = (inject: Record<string, unknown>): string | undefined => {
  try {
    checkEgressRules(withInject(inject));
  } catch (err) {
    assert.ok(err instanceof EgressRuleError, String(err));
    return err.message;
  }
  return undefined;
};

test('a secret or format holding a character past U+00FF is refused: latin1 would send U+010D U+010A as CR LF', () => {
  const smuggle = 'sk-live-0123456789\u010D\u010AContent-Length: 70\u010D\u010A\u010D\u010APOST /capture HTTP/1.1';
  const secret = refusal({ header: 'X-Api-Key', secret: smuggle });
  assert.match(secret ?? '', /inject\[0\]\.secret holds a character past Latin-1 \(U\+00FF\) at index 18/);
  assert.equal(secret?.includes('sk-live'), false, 'the message never holds the secret');
  assert.match(refusal({ header: 'Authorization', format: 'Bearer\u2028${SECRET}', secret: 'abcdefgh' }) ?? '', /\.format holds a character past Latin-1/);
  for (const c of ['\u0100', '\u2028', '\u{1F600}', '\uFF0A']) assert.ok(refusal({ header: 'X-K', secret: `ab${c}cd` }), JSON.stringify(c));
});

test('a secret or format holding a control character is refused; tab, space, visible ASCII and Latin-1 pass', () => {
  for (const c of ['\r', '\n', '\0', '\u0001', '\u001b', '\u007f']) {
    assert.match(refusal({ header: 'X-K', secret: `ab${c}cd` }) ?? '', /secret holds a control character/, JSON.stringify(c));
    assert.match(refusal({ header: 'X-K', format: `a${c}\${SECRET}`, secret: 'abcd' }) ?? '', /format holds a control character/, JSON.stringify(c));
  }
  const [rule] = checkEgressRules(withInject({ header: 'X-K', format: 'Token\t${SECRET} caf\u00e9', secret: 'a~b \u00ff\u0080' }));
  assert.deepEqual(rule.action.inject, [{ header: 'X-K', format: 'Token\t${SECRET} caf\u00e9', secret: 'a~b \u00ff\u0080' }]);
});

test('unsafeHeaderCharAt finds the first character a header value cannot carry', () => {
  assert.equal(unsafeHeaderCharAt('plain value\t\u00e9'), -1);
  assert.equal(unsafeHeaderCharAt('ab\u010Dc'), 2);
  assert.equal(unsafeHeaderCharAt('\nx'), 0);
});

test('a rule host or SNI that is an address with a leading zero in an octet is written as the dotted quad', () => {
  const ruleOf = (match: Record<string, unknown>) => checkEgressRules([{ name: 'r', match, action: { allow: false } }])[0]!.match;
  assert.deepEqual(ruleOf({ host: '127.0.0.01' }), { host: '127.0.0.1' });
  assert.deepEqual(ruleOf({ sni: '10.0.0.08' }), { sni: '10.0.0.8' });
  assert.deepEqual(ruleOf({ host: '10.00.0.1' }), { host: '10.0.0.1' });
  for (const host of ['127.0.0.1', '10.0.0.0', '0.0.0.0', 'api.test', '*.example.com']) assert.deepEqual(ruleOf({ host }), { host });
  assert.throws(() => ruleOf({ host: '10.0.0.010' }), EgressRuleError);
});
