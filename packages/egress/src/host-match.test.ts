import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostMatches, normalizeHost } from './host-match.ts';

test('hostMatches: exact names, case-insensitively, trailing dot and port ignored', () => {
  assert.equal(hostMatches('api.example.com', 'API.Example.com'), true);
  assert.equal(hostMatches('api.example.com.', 'api.example.com'), true);
  assert.equal(hostMatches('api.example.com', 'api.example.com.:443'), true);
  assert.equal(hostMatches('api.example.com', 'api.example.com:8443'), true);
  assert.equal(hostMatches('api.example.com', 'example.com'), false);
  assert.equal(hostMatches('api.example.com', 'xapi.example.com'), false);
});

test('hostMatches: *.x matches subdomains at any depth, never x itself', () => {
  assert.equal(hostMatches('*.example.com', 'a.example.com'), true);
  assert.equal(hostMatches('*.example.com', 'a.b.c.example.com'), true);
  assert.equal(hostMatches('*.example.com', 'A.EXAMPLE.COM:80'), true);
  assert.equal(hostMatches('*.example.com', 'example.com'), false);
  assert.equal(hostMatches('*.example.com', 'example.com.'), false);
  assert.equal(hostMatches('*.example.com', 'badexample.com'), false);
  assert.equal(hostMatches('*.example.com', 'example.com.evil.net'), false);
});

test('hostMatches: an IPv4 pattern matches only that address', () => {
  assert.equal(hostMatches('10.0.0.1', '10.0.0.1'), true);
  assert.equal(hostMatches('10.0.0.1', '10.0.0.1:8080'), true);
  assert.equal(hostMatches('10.0.0.1', '10.0.0.10'), false);
  assert.equal(hostMatches('10.0.0.1', '110.0.0.1'), false);
  assert.equal(hostMatches('*.0.0.1', '10.0.0.1'), false);
});

test('hostMatches: empty names match nothing', () => {
  assert.equal(hostMatches('example.com', ''), false);
  assert.equal(hostMatches('*.example.com', ''), false);
});

test('normalizeHost strips brackets and ports of IPv6 literals and keeps their colons', () => {
  assert.equal(normalizeHost('[::1]:443'), '::1');
  assert.equal(normalizeHost('::1'), '::1');
});
