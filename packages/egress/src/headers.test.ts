import assert from 'node:assert/strict';
import { test } from 'node:test';
import { injectedHeaders, sandboxResponseHeaders, upstreamRequestHeaders } from './headers.ts';

test('request headers: hop-by-hop and Connection-listed ones go, Host and framing stay, order and case kept', () => {
  const raw = ['Host', 'api.example.test:8443', 'Connection', 'keep-alive, X-Hop', 'X-Hop', '1', 'Keep-Alive', 'timeout=5',
    'Proxy-Authorization', 'Basic x', 'TE', 'trailers', 'Upgrade', 'h2c', 'Expect', '100-continue', 'Transfer-Encoding', 'chunked', 'X-Keep', 'yes'];
  assert.deepEqual(upstreamRequestHeaders(raw), ['Host', 'api.example.test:8443', 'Transfer-Encoding', 'chunked', 'X-Keep', 'yes']);
});

test('an injected header replaces every client header of that name, whatever its case', () => {
  const inject = injectedHeaders([{ header: 'Authorization', format: 'Bearer ${SECRET}', secret: 's$&1' }, { header: 'X-Api-Key', secret: 'k' }]);
  assert.deepEqual(inject, [{ name: 'Authorization', value: 'Bearer s$&1' }, { name: 'X-Api-Key', value: 'k' }]);
  const out = upstreamRequestHeaders(['Host', 'h', 'authorization', 'Bearer mine', 'AUTHORIZATION', 'x', 'x-api-key', 'mine'], inject);
  assert.deepEqual(out, ['Host', 'h', 'Authorization', 'Bearer s$&1', 'X-Api-Key', 'k']);
});

test('response headers: hop-by-hop and Transfer-Encoding go', () => {
  assert.deepEqual(sandboxResponseHeaders(['Content-Type', 'text/plain', 'Transfer-Encoding', 'chunked', 'Connection', 'close', 'Keep-Alive', 'timeout=5', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']),
    ['Content-Type', 'text/plain', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']);
});

test('a Connection header may drop the headers it lists, never Content-Length, Transfer-Encoding or Host (the framing of a pooled upstream connection)', () => {
  const out = upstreamRequestHeaders(['Host', 'h', 'Connection', 'content-length, Transfer-Encoding, host, x-drop', 'Content-Length', '5', 'X-Drop', '1', 'Transfer-Encoding', 'chunked']);
  assert.deepEqual(out, ['Host', 'h', 'Content-Length', '5', 'Transfer-Encoding', 'chunked']);
});

test('for an absolute-form request the authority replaces every Host the client sent, first in line', () => {
  const inject = injectedHeaders([{ header: 'Authorization', secret: 'k' }]);
  assert.deepEqual(upstreamRequestHeaders(['X-A', '1', 'Host', 'attacker.example', 'host', 'again.example'], inject, 'api.example.test:8443'),
    ['Host', 'api.example.test:8443', 'X-A', '1', 'Authorization', 'k']);
  assert.deepEqual(upstreamRequestHeaders(['X-A', '1'], [], 'api.example.test'), ['Host', 'api.example.test', 'X-A', '1'], 'an HTTP/1.0 request without Host gets one');
});
