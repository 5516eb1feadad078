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

test('a request target with a "#" is a reason to refuse: upstreams differ on where its path ends', () => {
  for (const url of ['/admin#frag', '/a?q=1#x', 'http://api.example.test/admin#x', '#']) {
    assert.match(requestTarget('http', url, 'api.example.test') as string, /holds a "#" \(a fragment\)/, url);
  }
});

test('a Host of numbers only that is not a dotted quad is a reason to refuse: getaddrinfo reads it as an address a rule never named', () => {
  // 127.0.0.1 as inet_aton reads it: one 32-bit number, hex, octal, fewer parts, leading zeros.
  for (const host of ['2130706433', '0x7f000001', '0x7f.1', '127.1', '127.0.1', '0177.0.0.1', '127.000.000.001', '01.2.3.4', '1.2.3.4.5', '0x', '2130706433:8080']) {
    assert.match(requestTarget('http', '/', host) as string, /an IPv4 address in another form than a dotted quad/, host);
    assert.match(requestTarget('http', `http://${host}/`, undefined) as string, /dotted quad/, `absolute ${host}`);
  }
  // CONNECT's target goes through the same check (connect-exchange.ts).
  assert.match(requestTarget('https', '', '0x7f.1:443') as string, /dotted quad/);
  // A dotted quad, and names with numbers in them, still go.
  assert.deepEqual(requestTarget('http', '/', '1.2.3.4'), { host: '1.2.3.4', port: 80, path: '/' });
  assert.deepEqual(requestTarget('http', '/', '0.0.0.0:81'), { host: '0.0.0.0', port: 81, path: '/' });
  for (const host of ['123.example.test', '1x.2', 'a1.b2.c3.d4', '0xg.1']) assert.equal(typeof requestTarget('http', '/', host), 'object', host);
});
