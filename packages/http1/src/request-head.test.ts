/**
 * requestHead and hasContentLength, the helpers the upstream pool writes requests with: the
 * request line and headers as latin1 text, CR/LF/NUL, other control characters and characters
 * past U+00FF refused, Content-Length found by name.
 * Each test has the 5 s limit of the upstream pool's tests, beside which these were written.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasContentLength, InvalidHeaderError, requestHead } from './request-head.ts';

test('requestHead writes the request line and headers in order, as latin1 text', { timeout: 5000 }, () => {
  const head = requestHead('GET', '/p?q=1', ['Host', 'api.example.test', 'X-Name', 'caf\u00e9', 'Accept', '*/*']);
  assert.equal(head, 'GET /p?q=1 HTTP/1.1\r\nHost: api.example.test\r\nX-Name: caf\u00e9\r\nAccept: */*\r\n\r\n');
  assert.ok(Buffer.from(head, 'latin1').includes(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0d])), 'one byte per character');
  assert.equal(requestHead('OPTIONS', '*', []), 'OPTIONS * HTTP/1.1\r\n\r\n');
});

test('requestHead refuses CR, LF and NUL in a header or the target', { timeout: 5000 }, () => {
  const bad: Array<[string, string[]]> = [['/', ['X-Secret', 'token\r\nX-Injected: 1']], ['/', ['X-Secret', 'tok\nen']],
    ['/', ['X-Secret', 'tok\0en']], ['/', ['X-Bad\r\nName', 'v']], ['/a\r\nHost: evil', ['Host', 'backend']]];
  const invalid = (err: unknown) => err instanceof InvalidHeaderError && err.code === 'ERR_INVALID_CHAR';
  for (const [target, headers] of bad) {
    assert.throws(() => requestHead('GET', target, headers), invalid, JSON.stringify([target, headers]));
  }
  assert.throws(() => requestHead('GET', '/', ['Host', 'b', 'X-Secret', 'a\rb']), { header: 'X-Secret' });
});

test('requestHead refuses a character past U+00FF, a control character or a non-token name (a latin1 write would split the request)', { timeout: 5000 }, () => {
  const invalid = (err: unknown) => err instanceof InvalidHeaderError && err.code === 'ERR_INVALID_CHAR';
  // U+010D U+010A written as latin1 are the bytes CR LF.
  const smuggle = 'sk-live\u010D\u010AContent-Length: 70\u010D\u010A\u010D\u010APOST /capture HTTP/1.1';
  const bad: Array<[string, string, string[]]> = [
    ['GET', '/', ['X-Api-Key', smuggle]], ['GET', '/', ['X-Key', '\u2028']], ['GET', '/', ['X-Key', 'a\u0001b']], ['GET', '/', ['X-Key', 'a\u007fb']],
    ['GET', '/', ['X-K\u010D\u010Aey', 'v']], ['GET', '/', ['X Key', 'v']], ['GET', '/', ['X-Key:', 'v']], ['GET', '/', ['', 'v']],
    ['GET', '/a b', []], ['GET', '/\u010D\u010A', []], ['GET', '/a\tb', []], ['G ET', '/', []], ['GET\u010A', '/', []],
  ];
  for (const [method, target, headers] of bad) {
    assert.throws(() => requestHead(method, target, headers), invalid, JSON.stringify([method, target, headers]));
  }
  assert.throws(() => requestHead('GET', '/', ['X-Api-Key', smuggle]), (err: Error) => !err.message.includes('sk-live'), 'the message never holds the value');
  // Tab, visible ASCII, space and Latin-1 (obs-text) still go.
  assert.equal(requestHead('GET', '/caf\u00e9', ['X-V', 'a\tb c \u00ff']), 'GET /caf\u00e9 HTTP/1.1\r\nX-V: a\tb c \u00ff\r\n\r\n');
});

test('hasContentLength finds the header whatever its case, among names only', { timeout: 5000 }, () => {
  for (const name of ['content-length', 'Content-Length', 'CONTENT-LENGTH', 'cOnTeNt-LeNgTh']) {
    assert.equal(hasContentLength(['Host', 'b', name, '0']), true, name);
  }
  assert.equal(hasContentLength(['Content-Lengths', '3', 'X-Content-Length', '3']), false);
  assert.equal(hasContentLength(['X-Header', 'content-length']), false, 'a value is not a name');
  assert.equal(hasContentLength([]), false);
});
