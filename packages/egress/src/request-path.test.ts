import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestPath, rulePath } from './request-path.ts';

const removeDotSegments = (path: string) => {
  const r = requestPath(path);
  return 'forward' in r ? r.forward : r.refused;
};

const forward = (target: string) => {
  const p = requestPath(target);
  assert.ok('forward' in p, `${target} was refused: ${'refused' in p ? p.refused : ''}`);
  return p.forward;
};
const refused = (target: string) => 'refused' in requestPath(target);

test('dot-segments are removed, plain and percent-encoded, so a prefix rule cannot be climbed out of', () => {
  assert.equal(forward('/v1/public/../../admin/keys'), '/admin/keys');
  assert.equal(forward('/v1/public/%2e%2e/%2e%2e/admin'), '/admin');
  assert.equal(forward('/v1/public/%2E%2e/%2e./admin?x=1'), '/admin?x=1');
  assert.equal(forward('/v1/public/%2E%2e/admin?next=/../x'), '/v1/admin?next=/../x');
  assert.equal(forward('/./admin'), '/admin');
  assert.equal(forward('/a/b/..'), '/a/');
  assert.equal(forward('/a/.'), '/a/');
  assert.equal(forward('/..'), '/');
  assert.equal(forward('/../../x'), '/x');
  assert.equal(forward('/a//../b'), '/a/b', 'as RFC 3986 5.2.4: the empty segment is the one `..` removes');
});

test('unreserved escapes are decoded, the others keep their escape with upper-case hex', () => {
  assert.equal(forward('/%61dmin'), '/admin');
  assert.equal(forward('/a%7Eb%2d%5F'), '/a~b-_');
  assert.equal(forward('/a%2fb%3a%20c'), '/a%2Fb%3A%20c');
  assert.equal(forward('/%25%32%65'), '/%252e', 'decoded once: %25 stays an escape');
  assert.equal(forward('/100%/x%4'), '/100%/x%4', 'a % without two hex digits stays');
  assert.equal(forward('/%%2e%2e/x'), '/%../x', 'an escape after a lone % is still read');
});

test('a dot-segment that appears only once an encoded slash or backslash is read as "/" is refused', () => {
  for (const bad of ['/a/..%2F..%2Fadmin', '/a/..%2f..%2fadmin', '/a/%2E%2E%2Fadmin', '/a/..%5Cadmin', '/a\\..\\admin', '/a/.%2Fb', '/v1/public/..;/admin', '/x/%2e%2e;jsessionid=1/admin']) {
    assert.ok(refused(bad), bad);
  }
  assert.match((requestPath('/a/..%2Fb') as { refused: string }).refused, /dot-segment/);
});

test('ordinary paths pass unchanged: queries with `..`, an encoded slash inside a segment, dots in names', () => {
  for (const ok of ['/', '/v1/items?page=2', '/search?q=../../etc&r=%2e%2e', '/api/v4/projects/group%2Fproject', '/api/v4/projects/group%2Fproject/repository/files/a%2Fb.txt',
    '/file.tar.gz', '/.well-known/openid-configuration', '/a..b/...', '/v1/a;b=c', '/x//y']) {
    assert.equal(forward(ok), ok, ok);
  }
  assert.equal(forward('*'), '*', 'OPTIONS * stays');
  assert.equal(forward('v1/../x'), 'v1/../x', 'a target without a leading / stays as it came');
  assert.equal(forward(''), '');
});

test('rules see runs of / as one, in the path only', () => {
  assert.equal(rulePath('//admin'), '/admin');
  assert.equal(rulePath('/v1///public//x?next=http://h//p'), '/v1/public/x?next=http://h//p');
  assert.equal(rulePath('/v1/x'), '/v1/x');
  assert.equal(rulePath(''), '');
});

test('removeDotSegments follows RFC 3986 5.2.4', () => {
  // The RFC's own example (5.2.4), and the normal examples of 5.4.1 that are absolute paths.
  assert.equal(removeDotSegments('/a/b/c/./../../g'), '/a/g');
  assert.equal(removeDotSegments('/b/c/./g'), '/b/c/g');
  assert.equal(removeDotSegments('/b/c/../../../g'), '/g');
  assert.equal(removeDotSegments('/b/c/g/..'), '/b/c/');
  assert.equal(removeDotSegments('/b/c/g.'), '/b/c/g.');
});
