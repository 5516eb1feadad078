import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ResponseParser, ResponseParseError } from './response-parser.ts';

interface Seen { status?: number; text?: string; headers?: string[]; body: string; trailers?: string[]; keepAlive?: boolean; completed: number }

function parserFor(headRequest = false) {
  const seen: Seen = { body: '', completed: 0 };
  const p = new ResponseParser({
    onHead: (status, text, headers) => { seen.status = status; seen.text = text; seen.headers = headers; },
    onBody: (c) => { seen.body += c.toString('latin1'); },
    onComplete: (trailers, keepAlive) => { seen.trailers = trailers; seen.keepAlive = keepAlive; seen.completed++; },
  });
  p.expect(headRequest);
  return { p, seen };
}

/** Feeds the text whole, and again one byte at a time: both must give the same result. */
function both(raw: string, headRequest = false): Seen {
  const whole = parserFor(headRequest);
  whole.p.execute(Buffer.from(raw, 'latin1'));
  const bytes = parserFor(headRequest);
  for (const b of Buffer.from(raw, 'latin1')) bytes.p.execute(Buffer.from([b]));
  assert.deepEqual(bytes.seen, whole.seen);
  return whole.seen;
}

test('content-length body, keep-alive by default on HTTP/1.1', () => {
  const s = both('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello');
  assert.equal(s.status, 200);
  assert.equal(s.text, 'OK');
  assert.deepEqual(s.headers, ['Content-Type', 'text/plain', 'Content-Length', '5']);
  assert.equal(s.body, 'hello');
  assert.equal(s.keepAlive, true);
  assert.equal(s.completed, 1);
});

test('chunked body with extensions and trailers is decoded', () => {
  const s = both('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Sum: abc\r\n\r\n');
  assert.equal(s.body, 'Wikipedia in\r\n\r\nchunks.');
  assert.deepEqual(s.trailers, ['X-Sum', 'abc']);
  assert.equal(s.keepAlive, true);
});

test('no body for HEAD, 204 and 304; 1xx responses are skipped', () => {
  assert.equal(both('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n', true).completed, 1);
  assert.equal(both('HTTP/1.1 204 No Content\r\n\r\n').completed, 1);
  assert.equal(both('HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n').body, '');
  const s = both('HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  assert.equal(s.status, 200);
  assert.equal(s.body, 'ok');
});

test('a body without length runs until the connection closes, which is not reusable', () => {
  const { p, seen } = parserFor();
  p.execute(Buffer.from('HTTP/1.1 200 OK\r\n\r\nsome'));
  p.execute(Buffer.from(' more'));
  assert.equal(seen.completed, 0);
  assert.equal(p.eof(), true);
  assert.equal(seen.body, 'some more');
  assert.equal(seen.keepAlive, false);
});

test('Connection: close and HTTP/1.0 without keep-alive end reuse; a short body at EOF is an error', () => {
  assert.equal(both('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n').keepAlive, false);
  assert.equal(both('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n').keepAlive, false);
  assert.equal(both('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n').keepAlive, true);
  const { p } = parserFor();
  p.execute(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'));
  assert.equal(p.eof(), false);
});

test('bytes beyond the response in the same read make the connection unusable', () => {
  // (Bytes arriving in a later read, on an idle connection, are the connection's business.)
  const { p, seen } = parserFor();
  p.execute(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA'));
  assert.equal(seen.body, 'ok');
  assert.equal(seen.keepAlive, false);
});

test('malformed responses are errors', () => {
  for (const raw of [
    'HTTX/1.1 200 OK\r\n\r\n',
    'HTTP/1.1 2x0 OK\r\n\r\n',
    'HTTP/1.1 200 OK\r\nno colon here\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX',
    // Both framings: relayed with the Content-Length, the rest would be read as the client's next answer.
    'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nc\r\nhello world!\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello',
    // A bare LF in the reason: relayed, it would put a header of the sandbox's choosing in the client's answer.
    'HTTP/1.1 200 OK\nX-Injected: yes\r\nContent-Length: 2\r\n\r\nok',
    // Header names that are no token: a space (before the colon or inside), a bare LF, a byte past ASCII, a bracket.
    'HTTP/1.1 200 OK\r\nX-Name : v\r\nContent-Length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX Name: v\r\nContent-Length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-A\nSet-Cookie: v\r\nContent-Length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-\u00e9: v\r\nContent-Length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\n[x]: v\r\nContent-Length: 0\r\n\r\n',
  ]) {
    const { p } = parserFor();
    assert.throws(() => p.execute(Buffer.from(raw)), ResponseParseError, raw);
  }
});

test('a status line without a reason phrase is fine', () => {
  const s = both('HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n');
  assert.equal(s.status, 200);
  assert.equal(s.text, '');
});

test('trailers past 16 KiB in all are an error, fed whole or a line at a time, not an ever-growing list', () => {
  const line = Buffer.from('x-t:vvvvvvvv\r\n');
  const { p } = parserFor();
  p.execute(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n'));
  // 16 KiB of trailers is the most; a sandbox that never ends them must not fill the heap.
  assert.throws(() => { for (let i = 0; i < 10_000; i++) p.execute(line); }, ResponseParseError);
  const whole = parserFor();
  assert.throws(() => whole.p.execute(Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n'), ...Array(2_000).fill(line)])), ResponseParseError);
  // Just under the limit is fine.
  const under = both(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n${'x-t:vvvvvvvv\r\n'.repeat(1_000)}\r\n`);
  assert.equal(under.trailers?.length, 2_000);
});

test('a trailer whose name is no token, or without a colon, is dropped, never relayed; the response completes', () => {
  for (const trailer of ['X Sum: v', 'X-Sum : v', '[x]: v', 'X-\u00e9: v', ': v', 'no colon', ' folded: v']) {
    const { p, seen } = parserFor();
    p.execute(Buffer.from(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n${trailer}\r\nX-Good: 1\r\n\r\n`, 'latin1'));
    assert.equal(seen.completed, 1, trailer);
    assert.equal(seen.body, 'ok', trailer);
    assert.deepEqual(seen.trailers, ['X-Good', '1'], trailer);
  }
});
