import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestTarget } from './request-target.ts';

test('origin-form: the Host header, its port or the scheme default, the URI as sent', () => {
  assert.deepEqual(requestTarget('https', '/v1/x?q=1', 'API.example.test:8443'), { host: 'api.example.test', port: 8443, path: '/v1/x?q=1' });
  assert.deepEqual(requestTarget('https', '/', 'api.example.test.'), { host: 'api.example.test', port: 443, path: '/' });
  assert.deepEqual(requestTarget('http', '/a/../b', '10.0.0.1'), { host: '10.0.0.1', port: 80, path: '/a/../b' });
});

test('absolute-form wins over the Host header', () => {
  assert.deepEqual(requestTarget('http', 'http://user@other.test:81/p?q', 'api.example.test'), { host: 'other.test', port: 81, path: '/p?q' });
  assert.deepEqual(requestTarget('http', 'http://other.test', undefined), { host: 'other.test', port: 80, path: '/' });
});

test('no Host, or a malformed one, is a reason to refuse', () => {
  assert.equal(typeof requestTarget('http', '/', undefined), 'string');
  for (const bad of ['', 'a b', 'x.test:0', 'x.test:70000', '[::1]:80', 'x..test', 'x.test:8a']) {
    assert.equal(typeof requestTarget('http', '/', bad), 'string', bad);
  }
});
