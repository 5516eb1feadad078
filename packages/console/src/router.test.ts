import assert from 'node:assert/strict';
import { test } from 'node:test';
import { href, parseHash } from './router.ts';

test('a hash is the route its link made; a malformed escape is a route not found, not a thrown URIError', () => {
  const r = parseHash(href('sandboxes', 'a/b %'));
  assert.deepEqual(r.parts, ['sandboxes', 'a/b %']);
  assert.equal(r.invalid, undefined);
  assert.equal(parseHash('#/templates?tab=builds').query.get('tab'), 'builds');
  assert.deepEqual(parseHash('').parts, []);
  for (const bad of ['#/sandboxes/%', '#/sandboxes/%E0%A4%A', '#/%zz?x=1']) {
    const route = parseHash(bad);
    assert.equal(route.invalid, true, bad);
    assert.deepEqual(route.parts, []);
  }
});
