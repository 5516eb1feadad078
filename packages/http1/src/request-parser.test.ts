import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestParser, RequestParseError, parseHead, type RequestHead } from './request-parser.ts';

interface Seen { heads: RequestHead[]; body: string; chunks: number; ends: (string[] | undefined)[] }

function parserFor(maxHead?: number) {
  const seen: Seen = { heads: [], body: '', chunks: 0, ends: [] };
  const p = new RequestParser({
    onRequest: (head) => { seen.heads.push(head); },
    onBody: (c) => { seen.body += c.toString('latin1'); seen.chunks++; },
    onEnd: (trailers) => { seen.ends.push(trailers); },
  }, maxHead);
  return { p, seen };
}

const bytesOf = (raw: string) => Buffer.from(raw, 'latin1');

/** Feeds the text whole, and again one byte at a time: both must give the same events (bar the body's slicing). */
function both(raw: string): Seen & { done: boolean } {
  const whole = parserFor();
  assert.equal(whole.p.execute(bytesOf(raw)), undefined);
  const single = parserFor();
  for (const b of bytesOf(raw)) assert.equal(single.p.execute(Buffer.from([b])), undefined);
  assert.deepEqual({ ...single.seen, chunks: 0 }, { ...whole.seen, chunks: 0 });
  assert.equal(single.p.done, whole.p.done);
  return { ...whole.seen, done: whole.p.done };
}

const isStatus = (status: number) => (e: unknown) => e instanceof RequestParseError && e.status === status && e.code === 'HPE_INVALID_REQUEST';

/** The text is refused with that status, whether it arrives whole or a byte at a time. */
function refuses(raw: string, status = 400, byteByByte = true) {
  const whole = parserFor();
  assert.throws(() => whole.p.execute(bytesOf(raw)), isStatus(status), JSON.stringify(raw));
  if (!byteByByte) return;
  const single = parserFor();
  assert.throws(() => { for (const b of bytesOf(raw)) single.p.execute(Buffer.from([b])); }, isStatus(status), JSON.stringify(raw));
}

const GET = 'GET / HTTP/1.1\r\nHost: x\r\n';
const req = (headers: string, body = '') => `POST /p HTTP/1.1\r\nHost: x\r\n${headers}\r\n${body}`;

test('a GET without a body ends at once', () => {
  const { p, seen } = parserFor();
  assert.equal(p.started, false);
  assert.equal(p.execute(bytesOf('GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n')), undefined);
  assert.equal(p.done, true);
  assert.equal(p.started, true);
  assert.equal(p.buffered, 0);
  assert.deepEqual(seen.ends, [undefined]);
  assert.equal(seen.body, '');
  const h = seen.heads[0];
  assert.deepEqual(
    { method: h.method, target: h.target, minor: h.minor, body: h.body, contentLength: h.contentLength, upgrade: h.upgrade, expectContinue: h.expectContinue },
    { method: 'GET', target: '/a?b=c', minor: 1, body: 'none', contentLength: 0, upgrade: false, expectContinue: false },
  );
  assert.deepEqual(h.headers, ['Host', 'example.com', 'Accept', '*/*']);
});

test('keep-alive: HTTP/1.1 by default, Connection: close, HTTP/1.0 closes unless keep-alive', () => {
  assert.equal(parseHead('GET / HTTP/1.1\r\nHost: x').keepAlive, true);
  assert.equal(parseHead('GET / HTTP/1.1\r\nHost: x\r\nConnection: close').keepAlive, false);
  assert.equal(parseHead('GET / HTTP/1.1\r\nHost: x\r\nConnection: TE, Close').keepAlive, false);
  assert.equal(parseHead('GET / HTTP/1.0').keepAlive, false);
  assert.equal(parseHead('GET / HTTP/1.0\r\nConnection: keep-alive').keepAlive, true);
  assert.equal(parseHead('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\xa0').keepAlive, true); // NBSP is no whitespace
  assert.equal(parseHead('GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\xa0\r\nUpgrade: h2c').upgrade, false);
});

test('header names keep their case; values lose surrounding spaces and tabs only', () => {
  const h = parseHead('GET / HTTP/1.1\r\nhOsT:x\r\nX-Mixed-Case: \t a \t b \t \r\nX-Empty:\r\nX-Obs: caf\xe9 \xff');
  assert.deepEqual(h.headers, ['hOsT', 'x', 'X-Mixed-Case', 'a \t b', 'X-Empty', '', 'X-Obs', 'caf\xe9 \xff']);
  // obs-text arriving as raw bytes, through the parser
  const s = both(`${GET}X-Obs: \x80\xa0\xff\r\n\r\n`);
  assert.deepEqual(s.heads[0].headers.slice(2), ['X-Obs', '\x80\xa0\xff']);
});

test('a Content-Length body arrives as slices, whole or across many feeds', () => {
  const raw = req('Content-Length: 11\r\n', 'hello world');
  const s = both(raw);
  assert.equal(s.heads[0].body, 'length');
  assert.equal(s.heads[0].contentLength, 11);
  assert.equal(s.body, 'hello world');
  assert.deepEqual(s.ends, [undefined]);
  assert.equal(s.done, true);

  // Fed whole, the body is a view of the received buffer, not a copy.
  const input = bytesOf(raw);
  const chunks: Buffer[] = [];
  new RequestParser({ onRequest() {}, onBody: (c) => chunks.push(c), onEnd() {} }).execute(input);
  assert.equal(chunks.length, 1);
  assert.equal(chunks[0].buffer, input.buffer);

  // Head whole, body a byte at a time: one onBody per byte, onEnd only after the last.
  const { p, seen } = parserFor();
  p.execute(bytesOf(req('Content-Length: 5\r\n')));
  for (const c of 'abcd') { p.execute(bytesOf(c)); assert.equal(p.done, false); }
  assert.deepEqual(seen.ends, []);
  p.execute(bytesOf('e'));
  assert.equal(seen.body, 'abcde');
  assert.equal(seen.chunks, 5);
  assert.deepEqual(seen.ends, [undefined]);
  assert.equal(p.done, true);
});

test('two equal Content-Lengths are one; Content-Length: 0 is no body', () => {
  const s = both(req('Content-Length: 3\r\ncontent-length: 3\r\n', 'abc'));
  assert.equal(s.body, 'abc');
  const z = both(req('Content-Length: 0\r\n'));
  assert.equal(z.heads[0].body, 'none');
  assert.equal(z.done, true);
});

const CHUNKED = req('Transfer-Encoding: chunked\r\nTrailer: X-Sum\r\n', '4;ext=1;q="a b"\r\nWiki\r\n5 ; x\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n00\r\nX-Sum: abc \r\nX-Other:\tv\r\n\r\n');

test('a chunked body is decoded, with extensions and trailers, at any split point', () => {
  const s = both(CHUNKED);
  assert.equal(s.heads[0].body, 'chunked');
  assert.equal(s.body, 'Wikipedia in\r\n\r\nchunks.');
  assert.deepEqual(s.ends, [['X-Sum', 'abc', 'X-Other', 'v']]);
  assert.equal(s.done, true);
  const input = bytesOf(CHUNKED);
  for (let i = 1; i < input.length; i++) {
    const { p, seen } = parserFor();
    p.execute(input.subarray(0, i));
    p.execute(input.subarray(i));
    assert.equal(seen.body, s.body, `split at ${i}`);
    assert.deepEqual(seen.ends, s.ends, `split at ${i}`);
  }
  // Without trailers, onEnd has none; an upper-case size is hex too.
  const t = both(req('Transfer-Encoding: Chunked\r\n', 'A\r\n0123456789\r\n0\r\n\r\n'));
  assert.equal(t.body, '0123456789');
  assert.deepEqual(t.ends, [undefined]);
});

test('pipelined requests: the second is parsed only after next()', () => {
  const { p, seen } = parserFor();
  const second = 'POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz';
  p.execute(bytesOf(`${GET}\r\n${second}`));
  assert.equal(seen.heads.length, 1);
  assert.equal(p.done, true);
  assert.equal(p.buffered, second.length);
  // More bytes while one is done are only buffered.
  assert.equal(p.execute(bytesOf('GET /three HTTP/1.1\r\nHost: x\r\n\r\n')), undefined);
  assert.equal(seen.heads.length, 1);
  assert.equal(p.next(), undefined);
  assert.deepEqual(seen.heads.map((h) => h.target), ['/', '/two']);
  assert.equal(seen.body, 'xyz');
  assert.equal(p.done, true);
  p.next();
  assert.deepEqual(seen.heads.map((h) => h.target), ['/', '/two', '/three']);
  assert.equal(p.buffered, 0);
  p.next();
  assert.equal(p.done, false);
  assert.equal(p.started, false);
  assert.equal(p.next(), undefined); // not done: nothing happens
});

test('a CRLF before the request line (after a body) is ignored', () => {
  const s = both(`\r\n\r\n${GET}\r\n`);
  assert.equal(s.heads[0].target, '/');
  const { p, seen } = parserFor();
  p.execute(bytesOf(req('Content-Length: 2\r\n', 'ab\r\n')));
  p.next();
  p.execute(bytesOf(`${GET}\r\n`));
  assert.equal(seen.heads.length, 2);
});

test('Upgrade and CONNECT hand back the bytes after the head and parse nothing more', () => {
  const ws = 'GET /ws HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n';
  const { p, seen } = parserFor();
  const rest = p.execute(bytesOf(`${ws}\x81\x05hello GET / HTTP/1.1\r\n`));
  assert.equal(rest?.toString('latin1'), '\x81\x05hello GET / HTTP/1.1\r\n');
  assert.equal(seen.heads[0].upgrade, true);
  assert.deepEqual(seen.ends, []);
  assert.equal(p.execute(bytesOf(`${GET}\r\n`)), undefined);
  assert.equal(seen.heads.length, 1);

  const byByte = parserFor();
  const input = bytesOf(ws);
  for (let i = 0; i < input.length - 1; i++) assert.equal(byByte.p.execute(input.subarray(i, i + 1)), undefined);
  assert.deepEqual(byByte.p.execute(input.subarray(input.length - 1)), Buffer.alloc(0));

  const c = parserFor();
  assert.deepEqual(c.p.execute(bytesOf('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')), Buffer.alloc(0));
  assert.equal(c.seen.heads[0].target, 'example.com:443');
  assert.equal(c.seen.heads[0].upgrade, true);

  // An upgrade pipelined behind a request comes back from next().
  const n = parserFor();
  n.p.execute(bytesOf(`${GET}\r\n${ws}tail`));
  assert.equal(n.p.next()?.toString(), 'tail');

  // Upgrade without Connection: upgrade (or the reverse) is an ordinary request.
  assert.equal(parseHead('GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket').upgrade, false);
  assert.equal(parseHead('GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade').upgrade, false);
});

test('Expect: 100-continue counts only with a body', () => {
  assert.equal(parseHead('POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 5').expectContinue, true);
  assert.equal(parseHead('POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked').expectContinue, true);
  assert.equal(parseHead('POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue').expectContinue, false);
  assert.equal(parseHead('POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 0').expectContinue, false);
});

test('HEAD, OPTIONS *, an absolute-form target and HTTP/1.0 without Host are fine', () => {
  assert.equal(both('HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n').heads[0].method, 'HEAD');
  assert.equal(both('OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n').heads[0].target, '*');
  assert.equal(parseHead('GET http://example.com:8080/a?b HTTP/1.1\r\nHost: example.com:8080').target, 'http://example.com:8080/a?b');
  const s = both('GET / HTTP/1.0\r\n\r\n');
  assert.equal(s.heads[0].minor, 0);
  assert.equal(s.done, true);
});

test('framing that two parsers could read two ways is refused', () => {
  refuses(req('Content-Length: 3\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'));
  refuses(req('Transfer-Encoding: chunked\r\nContent-Length: 0\r\n', '0\r\n\r\n'));
  refuses(req('Content-Length: 3\r\nContent-Length: 4\r\n', 'abcd'));
  for (const cl of ['+5', '5 5', '0x10', '-1', '1,1', '1, 1', '', '1e3', '\u0665', '1234567890123456']) {
    refuses(req(`Content-Length: ${cl}\r\n`));
  }
});

test('Transfer-Encoding: chunked last or nothing, and only alone', () => {
  refuses(req('Transfer-Encoding: gzip\r\n', 'abc'));
  refuses(req('Transfer-Encoding: chunked, gzip\r\n'));
  refuses(req('Transfer-Encoding: chunked,\r\n'));
  refuses(req('Transfer-Encoding: xchunked\r\n'));
  refuses(req('Transfer-Encoding: gzip, chunked\r\n', '0\r\n\r\n'));
  // chunked in a second header, after another coding, is the same list
  refuses(req('Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'));
  refuses(req('Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n', '0\r\n\r\n'));
  // Only SP and HTAB are whitespace around a coding: an obs-text NBSP makes an unknown coding.
  refuses(req('Transfer-Encoding: chunked\xa0\r\n', '0\r\n\r\n'));
  refuses('POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
});

test('malformed header lines are refused', () => {
  refuses(`${GET}X-Long: a\r\n folded\r\n\r\n`); // obs-fold
  refuses(`${GET}X-Long: a\r\n\tfolded: b\r\n\r\n`);
  refuses('GET / HTTP/1.1\r\nHost : x\r\n\r\n');
  refuses(`${GET}X-A\t: b\r\n\r\n`);
  refuses(`${GET}: empty name\r\n\r\n`);
  refuses(`${GET}no colon\r\n\r\n`);
  refuses(`${GET}X-N\xe4me: b\r\n\r\n`);
  refuses(`${GET}X-A(b): c\r\n\r\n`);
  for (const c of ['\x00', '\x01', '\x7f', '\x0b', '\x1b']) refuses(`${GET}X-A: a${c}b\r\n\r\n`);
  refuses(`${GET}X-A: a\nb\r\n\r\n`); // bare LF in a value
  refuses(`${GET}X-A: a\rb\r\n\r\n`); // bare CR
  refuses(`${GET}X-A: a\r\r\n\r\n`);
  refuses(`GET / HTTP/1.1\nHost: x\r\n\r\n`);
});

test('LF-only line endings are refused at once, not waited on', () => {
  refuses('GET / HTTP/1.1\nHost: x\n\n');
  refuses(`${GET}X-A: b\n\n`);
  const { p } = parserFor();
  p.execute(bytesOf('GET / HTTP/1.1\nHost: x\n'));
  assert.throws(() => p.execute(bytesOf('\n')), isStatus(400));
});

test('Host: exactly one on HTTP/1.1, at most one on HTTP/1.0', () => {
  refuses('GET / HTTP/1.1\r\n\r\n');
  refuses('GET / HTTP/1.1\r\nX-Host: x\r\n\r\n');
  refuses('GET / HTTP/1.1\r\nHost: x\r\nhost: x\r\n\r\n');
  refuses('GET / HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n');
  assert.equal(parseHead('GET / HTTP/1.0\r\nHost: x').minor, 0);
});

test('versions: 1.0 and 1.1 only, others 400 (a client\'s mistake, not a server error)', () => {
  refuses('GET / HTTP/2.0\r\nHost: x\r\n\r\n', 400);
  refuses('GET / HTTP/1.2\r\nHost: x\r\n\r\n', 400);
  refuses('GET / HTTP/0.9\r\n\r\n', 400);
  refuses('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 400);
  for (const v of ['HTTP/1.1x', 'http/1.1', 'HTTP/1', 'HTTP/11', 'HTTP/1.1 ', 'HTTP/1.1\t', 'HTTP /1.1', '']) {
    refuses(`GET / ${v}\r\nHost: x\r\n\r\n`);
  }
});

test('malformed request lines and methods are refused', () => {
  for (const line of [
    'GET  / HTTP/1.1', 'GET /  HTTP/1.1', ' GET / HTTP/1.1', 'GET / HTTP/1.1 ', 'GET /a b HTTP/1.1', 'GET /a\tb HTTP/1.1',
    'GET /a\x00b HTTP/1.1', 'GET /a\x7fb HTTP/1.1', 'GET /a\x01 HTTP/1.1', 'GET HTTP/1.1', 'GET', 'G(T / HTTP/1.1',
    'G\xc9T / HTTP/1.1', 'GE:T / HTTP/1.1', '\tGET / HTTP/1.1',
  ]) refuses(`${line}\r\nHost: x\r\n\r\n`);
  refuses('\nGET / HTTP/1.1\r\nHost: x\r\n\r\n');
});

test('a head over 16 KiB is refused with 431, complete or still growing', () => {
  const big = `${GET}X-Big: ${'a'.repeat(16 * 1024)}\r\n\r\n`;
  refuses(big, 431, false);
  // Growing in 1 KiB pieces, without ever completing: refused once past the limit.
  const { p } = parserFor();
  const piece = bytesOf(`X-Pad: ${'b'.repeat(1014)}\r\n`);
  p.execute(bytesOf(GET));
  let fed = GET.length;
  assert.throws(() => { for (;;) { p.execute(piece); fed += piece.length; } }, isStatus(431));
  assert.ok(fed <= 16 * 1024 && fed + piece.length > 16 * 1024, `refused after ${fed} bytes`);
  // Under the limit is fine (a few bytes below it: a still incomplete head counts its partial CRLFCRLF), and the limit can be set.
  assert.equal(both(`${GET}X-Big: ${'a'.repeat(16 * 1024 - GET.length - 12)}\r\n\r\n`).done, true);
  const small = parserFor(64);
  assert.throws(() => small.p.execute(bytesOf(`${GET}X-A: ${'c'.repeat(64)}`)), isStatus(431));
});

test('malformed chunks are refused', () => {
  const chunked = (body: string) => req('Transfer-Encoding: chunked\r\n', body);
  refuses(chunked('g\r\nabc\r\n0\r\n\r\n'));
  refuses(chunked('0x5\r\nabcde\r\n0\r\n\r\n'));
  refuses(chunked('-5\r\nabcde\r\n0\r\n\r\n'));
  refuses(chunked(' 5\r\nabcde\r\n0\r\n\r\n'));
  refuses(chunked('\r\nabc\r\n0\r\n\r\n'));
  refuses(chunked('5\nabcde\r\n0\r\n\r\n'));
  refuses(chunked('5;a\nb\r\nabcde\r\n0\r\n\r\n'));
  refuses(chunked('5;a\x00\r\nabcde\r\n0\r\n\r\n'));
  refuses(chunked('1000000000000\r\nabc'));
  refuses(chunked('0000000000005\r\nabcde\r\n0\r\n\r\n'));
  assert.equal(both(chunked('000000000005\r\nabcde\r\n0\r\n\r\n')).body, 'abcde');
  refuses(chunked('3\r\nabcd\r\n0\r\n\r\n'));
  refuses(chunked('3\r\nabc\n0\r\n\r\n'));
  refuses(chunked('3\r\nabc0\r\n\r\n'));
  refuses(chunked(`1;${'e'.repeat(9000)}`));
});

test('malformed or oversized trailers are refused', () => {
  const chunked = (trailers: string) => req('Transfer-Encoding: chunked\r\n', `1\r\na\r\n0\r\n${trailers}\r\n`);
  refuses(chunked('X-No-Colon\r\n'));
  refuses(chunked('X-A : b\r\n'));
  refuses(chunked('X-A: b\r\n folded\r\n'));
  refuses(chunked('X-A: b\x00\r\n'));
  refuses(chunked('X-A: b\nX-B: c\r\n'));
  const line = `X-T: ${'t'.repeat(6000)}\r\n`;
  assert.equal(both(chunked(line + line)).ends[0]?.length, 4);
  refuses(chunked(line + line + line), 431, false);
  const { p } = parserFor();
  p.execute(bytesOf(chunked('').slice(0, -2)));
  p.execute(bytesOf(line));
  p.execute(bytesOf(line));
  assert.throws(() => p.execute(bytesOf(line)), isStatus(431));
});
