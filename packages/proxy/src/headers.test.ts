import { test } from 'node:test';
import assert from 'node:assert/strict';
import { maskedHost, requestHead, scanRequestHeaders } from './headers.ts';

test('maskRequestHost replaces the client\'s Host (once, ${PORT} made the port); without it the client\'s Host goes through', () => {
  const scan = () => scanRequestHeaders(['Host', '8080-abc.example.com', 'Accept', '*/*', 'host', 'second.example.com']);
  const mask = maskedHost({ maskRequestHost: 'custom-host.example.com:${PORT}' }, 8080);
  assert.equal(mask, 'custom-host.example.com:8080');
  const masked = requestHead('GET', '/x', scan(), '10.0.0.2:8080', mask);
  assert.equal(masked, 'GET /x HTTP/1.1\r\nHost: custom-host.example.com:8080\r\nAccept: */*\r\n\r\n');
  const plain = requestHead('GET', '/x', scan(), '10.0.0.2:8080', maskedHost({}, 8080));
  assert.match(plain, /^GET \/x HTTP\/1\.1\r\nHost: 8080-abc\.example\.com\r\n/);
  const none = requestHead('GET', '/', scanRequestHeaders(['Accept', '*/*']), '10.0.0.2:8080');
  assert.match(none, /\r\nHost: 10\.0\.0\.2:8080\r\n/, 'a request without Host gets the backend\'s');
});

test('a Connection header may drop the headers it lists, never Content-Length, Transfer-Encoding or Host (the framing the body is sent by)', () => {
  const scan = scanRequestHeaders(['Host', 'h', 'Connection', 'Content-Length, transfer-encoding, HOST, X-Drop', 'Content-Length', '5', 'X-Drop', '1', 'Transfer-Encoding', 'chunked']);
  const names = scan.forward.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  assert.ok(names.includes('content-length') && names.includes('transfer-encoding') && names.includes('host'), names.join(','));
  assert.ok(!names.includes('x-drop') && !names.includes('connection'), names.join(','));
});
