import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addForwardedHeaders, filterResponseHeaders, maskedHost, requestHead, scanRequestHeaders } from './headers.ts';

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

test('a Connection header listing more than 64 names marks the request refused; 64 are all dropped, in one pass', () => {
  const names = (n: number) => Array.from({ length: n }, (_, i) => `x-h${i}`);
  const raw = (n: number) => ['Host', 'h', 'Connection', names(n).join(', '), ...names(n).flatMap((h) => [h, 'v']), 'X-Keep', 'k'];
  const ok = scanRequestHeaders(raw(64));
  assert.equal(ok.refusal, undefined);
  assert.deepEqual(ok.forward, ['Host', 'h', 'X-Keep', 'k']);
  const many = scanRequestHeaders(raw(65));
  assert.match(many.refusal ?? '', /Connection/);
  // A sandbox's answer is not refused: past 64, the names it lists are not honoured.
  const answer = filterResponseHeaders(['Connection', names(65).join(','), ...names(65).flatMap((h) => [h, 'v'])]);
  assert.deepEqual(answer, ['x-h64', 'v']);
});

test('X-Forwarded-For, -Host and -Proto a client sends are replaced by the proxy\'s own, never appended to', () => {
  const scan = scanRequestHeaders([
    'Host', '8000-abc.example.com', 'X-Forwarded-For', '203.0.113.9', 'x-forwarded-for', '10.0.0.1',
    'X-Forwarded-Host', 'admin.internal', 'X-Forwarded-Proto', 'https', 'Accept', '*/*',
  ]);
  addForwardedHeaders(scan, '198.51.100.7', 'http');
  const forwarded = (name: string) => scan.forward.filter((_, i) => i % 2 === 1 && scan.forward[i - 1].toLowerCase() === name);
  assert.deepEqual(forwarded('x-forwarded-for'), ['198.51.100.7']);
  assert.deepEqual(forwarded('x-forwarded-host'), ['8000-abc.example.com']);
  assert.deepEqual(forwarded('x-forwarded-proto'), ['http']);
  assert.deepEqual(forwarded('accept'), ['*/*']);
});
