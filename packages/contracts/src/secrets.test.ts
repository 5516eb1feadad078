/** The secret placeholders of egress rules (`{{secret.NAME}}`, `{{token.NAME}}`): found and filled. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fillPlaceholders, placeholderRefs } from './secrets.ts';

test('placeholderRefs finds secret and token references, each once, in order', () => {
  assert.deepEqual(placeholderRefs('Bearer ${e2b.secrets.api-key}; ${e2b.identity.tokens.aws} ${e2b.secrets.API-KEY} ${e2b.secrets.api-key}'), {
    secrets: ['api-key', 'API-KEY'],
    tokens: ['aws'],
  });
  assert.deepEqual(placeholderRefs('no placeholders, ${HOME}, $ {e2b.secrets.x}, ${E2B.secrets.x}, ${e2b.secret.x}'), { secrets: [], tokens: [] });
});

test('a placeholder\'s name is everything up to the next }; without a } or a name it is text', () => {
  assert.deepEqual(placeholderRefs('${e2b.secrets.a{b}c}'), { secrets: ['a{b'], tokens: [] });
  assert.deepEqual(placeholderRefs('${e2b.secrets.}${e2b.identity.tokens.}'), { secrets: [], tokens: [] });
  assert.deepEqual(placeholderRefs('${e2b.secrets.unclosed'), { secrets: [], tokens: [] });
  assert.deepEqual(placeholderRefs('${${e2b.secrets.inner}}'), { secrets: ['inner'], tokens: [] });
});

test('fillPlaceholders replaces every placeholder and leaves other text as it is', () => {
  const lookup = { secret: (n: string) => `S(${n})`, token: (n: string) => `T(${n})` };
  assert.equal(fillPlaceholders('Bearer ${e2b.secrets.k}', lookup), 'Bearer S(k)');
  assert.equal(fillPlaceholders('${e2b.secrets.a}${e2b.identity.tokens.b}-${e2b.secrets.a}', lookup), 'S(a)T(b)-S(a)');
  assert.equal(fillPlaceholders('$${e2b.secrets.a}}', lookup), '$S(a)}');
  assert.equal(fillPlaceholders('${${e2b.secrets.a}', lookup), '${S(a)');
  for (const text of ['', 'plain', '${HOME}', '${', '${e2b.secrets.', '${e2b.secrets.}', '${e2b.secrets.x', 'a } b { c']) {
    assert.equal(fillPlaceholders(text, lookup), text);
  }
});

test('fillPlaceholders does not expand a placeholder inside a substituted value, and a failing lookup throws', () => {
  const asked: string[] = [];
  const lookup = {
    secret: (n: string) => { asked.push(n); if (n === 'missing') throw new Error('no such secret'); return '${e2b.secrets.other}'; },
    token: () => '${e2b.identity.tokens.t}',
  };
  assert.equal(fillPlaceholders('x=${e2b.secrets.a} y=${e2b.identity.tokens.b}', lookup), 'x=${e2b.secrets.other} y=${e2b.identity.tokens.t}');
  assert.deepEqual(asked, ['a']);
  assert.throws(() => fillPlaceholders('${e2b.secrets.missing}', lookup), /no such secret/);
});
