import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { createHttpApp } from './http-server.ts';
import { createLogger } from './log.ts';

let app: FastifyInstance;
let port: number;

before(async () => {
  app = createHttpApp({ logger: createLogger('test', { level: 'silent' }), bodyLimit: 64 * 1024 });
  app.post('/echo', async (req) => ({ body: req.body ?? null }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as { port: number }).port;
});
after(() => app.close());

function post(body: Buffer, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/echo', method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('a body over the limit gets 413 with the JSON error body, valid JSON or not, never a reset', async () => {
  const garbage = Buffer.alloc(12 * 1024 * 1024, 'x{');
  const json = Buffer.from(JSON.stringify({ a: 'y'.repeat(12 * 1024 * 1024) }));
  for (let i = 0; i < 5; i++) {
    for (const body of [garbage, json]) {
      for (const headers of [{}, { 'transfer-encoding': 'chunked' }] as Record<string, string>[]) {
        const r = await post(body, headers);
        assert.equal(r.status, 413);
        assert.deepEqual(JSON.parse(r.body), { code: 413, message: 'request body is larger than 65536 bytes' });
      }
    }
  }
});

test('malformed JSON is a 400 with the JSON body; an empty JSON body is no body', async () => {
  const bad = await post(Buffer.from('{"a":'));
  assert.equal(bad.status, 400);
  assert.equal(JSON.parse(bad.body).code, 400);
  const empty = await post(Buffer.alloc(0));
  assert.deepEqual(JSON.parse(empty.body), { body: null });
});

/** As curl uploads: headers, then the body in pieces while the answer may already be coming. */
function uploadRaw(size: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let answer = '';
    sock.setEncoding('latin1');
    sock.on('data', (d: string) => { answer += d; });
    sock.on('error', (err) => (answer.includes('\r\n\r\n{') ? resolve(answer) : reject(err)));
    sock.on('close', () => resolve(answer));
    sock.on('connect', async () => {
      sock.write(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`);
      const chunk = Buffer.alloc(64 * 1024, 'z');
      for (let sent = 0; sent < size && !sock.destroyed; sent += chunk.length) {
        if (!sock.write(chunk)) await new Promise((r) => sock.once('drain', r));
      }
    });
  });
}

test('a raw upload far over the limit reads its 413 before the connection closes', async () => {
  for (let i = 0; i < 5; i++) {
    const answer = await uploadRaw(16 * 1024 * 1024);
    assert.match(answer, /^HTTP\/1.1 413 /);
  }
});

test('JSON nested deeper than the stack can re-serialise is a 400, shallow nesting and brackets in strings are fine', async () => {
  const deep = await post(Buffer.from('['.repeat(20_000) + ']'.repeat(20_000)));
  assert.equal(deep.status, 400);
  assert.match(JSON.parse(deep.body).message, /nests deeper/);
  const ok = await post(Buffer.from(JSON.stringify({ a: [[[{ b: '[[[[[[' + '{'.repeat(500) }]]] })));
  assert.equal(ok.status, 200);
});

test('bytes that are not HTTP get the {code, message} JSON body too', async () => {
  for (const [raw, status] of [['BLAH\r\n\r\n', 400], [`GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`, 431]] as const) {
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port }, () => socket.write(raw));
      let text = '';
      socket.on('data', (d) => { text += d.toString('latin1'); });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    assert.match(answer, new RegExp(`^HTTP/1.1 ${status} `));
    assert.deepEqual(Object.keys(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))), ['code', 'message']);
  }
});

test('the router\'s refusals (bad percent-encoding, overlong parameter) are {code, message} too', async () => {
  const probe = createHttpApp({ logger: createLogger('test', { level: 'silent' }) });
  probe.get('/x/:id', async () => ({}));
  try {
    for (const [url, status] of [['/x/%zz', 400], [`/x/${'a'.repeat(1000)}`, 414]] as const) {
      const res = await probe.inject({ method: 'GET', url });
      assert.equal(res.statusCode, status);
      assert.deepEqual(Object.keys(res.json()), ['code', 'message']);
    }
  } finally {
    await probe.close();
  }
});

test('https: the app serves TLS with the given key and certificate (cluster_tls), and refuses plain HTTP', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-tls-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'k.pem', '-out', 'c.pem', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { cwd: dir, stdio: 'ignore' });
  const cert = readFileSync(join(dir, 'c.pem'));
  const app = createHttpApp({ logger: createLogger('test', { level: 'silent' }), https: { key: readFileSync(join(dir, 'k.pem')), cert } });
  app.get('/hello', async () => ({ ok: true }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  try {
    const body = await new Promise<string>((resolve, reject) => {
      httpsRequest(`https://127.0.0.1:${port}/hello`, { ca: cert }, (res) => {
        let t = '';
        res.on('data', (d: Buffer) => { t += d; });
        res.on('end', () => resolve(t));
      }).on('error', reject).end();
    });
    assert.deepEqual(JSON.parse(body), { ok: true });
    await assert.rejects(fetch(`http://127.0.0.1:${port}/hello`).then((r) => r.text()));
  } finally {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
