import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestTarget } from './request-target.ts';

test('origin-form: the Host header, its port or the scheme default, the path as forwarded; the Host goes as sent', () => {
  assert.deepEqual(requestTarget('https', '/v1/x?q=1', 'API.example.test:8443'), { host: 'api.example.test', port: 8443, path: '/v1/x?q=1' });
  assert.deepEqual(requestTarget('https', '/', 'api.example.test.'), { host: 'api.example.test', port: 443, path: '/' });
  assert.deepEqual(requestTarget('http', '/a/../b', '10.0.0.1'), { host: '10.0.0.1', port: 80, path: '/b' });
});

test('absolute-form wins over the Host header, and its authority replaces the Host sent upstream (RFC 9112 3.2.2)', () => {
  assert.deepEqual(requestTarget('http', 'http://user@other.test:81/p?q', 'api.example.test'), { host: 'other.test', port: 81, path: '/p?q', hostHeader: 'other.test:81' });
  assert.deepEqual(requestTarget('http', 'http://other.test', undefined), { host: 'other.test', port: 80, path: '/', hostHeader: 'other.test' });
  assert.deepEqual(requestTarget('https', 'https://API.example.test./x', 'attacker.example'), { host: 'api.example.test', port: 443, path: '/x', hostHeader: 'api.example.test' });
  assert.deepEqual(requestTarget('http', 'http://other.test?q=1', 'x.test'), { host: 'other.test', port: 80, path: '/?q=1', hostHeader: 'other.test' });
});

test('the path is normalised (request-path.ts), in both forms, and a hidden dot-segment is a reason to refuse', () => {
  assert.equal((requestTarget('https', 'https://api.example.test/v1/public/%2e%2e/%2e%2e/admin', undefined) as { path: string }).path, '/admin');
  assert.match(requestTarget('http', '/a/..%2F..%2Fadmin', 'api.example.test') as string, /dot-segment/);
  assert.match(requestTarget('http', 'http://api.example.test/a/..%5Cadmin', undefined) as string, /dot-segment/);
});

test('no Host, or a malformed one, is a reason to refuse', () => {
  assert.equal(typeof requestTarget('http', '/', undefined), 'string');
  for (const bad of ['', 'a b', 'x.test:0', 'x.test:70000', '[::1]:80', 'x..test', 'x.test:8a']) {
    assert.equal(typeof requestTarget('http', '/', bad), 'string', bad);
  }
});
