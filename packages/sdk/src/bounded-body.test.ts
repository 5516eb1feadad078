/**
 * Answers read with a bound: a sandbox answering an endless body (an error, a unary call's answer)
 * costs a bounded read and a cancelled connection, through every path that reads one.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { MAX_ERROR_BODY_BYTES, readBodyText, readErrorBody } from './bounded-body.ts';
import { CodeInterpreter } from './code-interpreter.ts';
import { EnvdTransport } from './envd/transport.ts';
import { SandboxError } from './errors.ts';

/** What the next request is answered: a status, a head, then `endlessMiB` of 'A' (or until the client leaves). */
let answer: { status: number; contentType: string; head: string; endlessMiB: number } = { status: 500, contentType: 'application/json', head: '', endlessMiB: 256 };
/** Bytes written to the last answer, and whether the client left before its end. */
let sent = 0;
let leftEarly = false;
let server: Server;
let url: string;

function endless(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  sent = 0;
  leftEarly = false;
  res.writeHead(answer.status, { 'content-type': answer.contentType });
  res.write(answer.head);
  const chunk = Buffer.alloc(1 << 20, 0x41);
  let n = 0;
  res.on('close', () => { if (!res.writableFinished) leftEarly = true; });
  const pump = () => {
    while (n < answer.endlessMiB && !res.destroyed) {
      n++;
      sent += chunk.length;
      if (!res.write(chunk)) { res.once('drain', pump); return; }
    }
    if (!res.destroyed) res.end('"}');
  };
  pump();
}

before(async () => {
  server = createServer(endless);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));

const target = () => ({ sandboxUrl: url, sandboxId: 'sbx-1', requestTimeoutMs: 30_000 });
const until = async (cond: () => boolean) => { for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 10)); };

test('readErrorBody keeps the head of a long body, says it was cut, and cancels the rest', async () => {
  answer = { status: 500, contentType: 'text/plain', head: 'start:', endlessMiB: 256 };
  const res = await fetch(url);
  const text = await readErrorBody(res);
  assert.ok(text.startsWith('start:AAAA'));
  assert.ok(text.length < MAX_ERROR_BODY_BYTES + 100, `${text.length} characters`);
  assert.match(text, /… \[cut: the answer was longer than 65536 bytes\]$/);
  await until(() => leftEarly);
  assert.ok(leftEarly && sent < 64 * 2 ** 20, `the server wrote ${sent} bytes`);
  const short = await fetch(url.replace(/$/, '/'), { method: 'HEAD' });
  assert.equal(await readErrorBody(short), '', 'no body: empty');
});

test('readBodyText refuses a body past its bound with a SandboxError naming the call', async () => {
  answer = { status: 200, contentType: 'application/json', head: '{"x":"', endlessMiB: 256 };
  await assert.rejects(readBodyText(await fetch(url), 1024 * 1024, 'GET /thing'), (err: unknown) =>
    err instanceof SandboxError && /^GET \/thing: the answer is larger than 1048576 bytes/.test(err.message));
  await until(() => leftEarly);
  assert.ok(leftEarly);
  answer = { status: 200, contentType: 'application/json', head: '{"ok":true', endlessMiB: 0 };
  assert.equal(await readBodyText(await fetch(url), 1024, 'GET /thing'), '{"ok":true"}');
});

test('envd: a unary call\'s and a stream\'s endless error answers make bounded errors', async () => {
  const envd = new EnvdTransport(target());
  answer = { status: 500, contentType: 'application/json', head: '{"code":"internal","message":"', endlessMiB: 256 };
  await assert.rejects(envd.unary('process.Process/List', {}), (err: Error) => err.message.length < 1000 && /^HTTP 500|AAAA/.test(err.message));
  const stream = envd.stream('process.Process/Start', {}, { timeoutMs: 0 });
  await assert.rejects(stream.next(), (err: Error) => err.message.length < 1000);
  await until(() => leftEarly);
  assert.ok(sent < 64 * 2 ** 20, `the server wrote ${sent} bytes`);
});

test('code interpreter: an endless error answer to /execute and to the contexts\' routes is bounded', async () => {
  const ci = new CodeInterpreter(target());
  answer = { status: 500, contentType: 'application/json', head: '{"message":"', endlessMiB: 256 };
  await assert.rejects(ci.runCode('1'), (err: Error) => err instanceof SandboxError && err.message.length < 1000);
  await assert.rejects(ci.listContexts(), (err: Error) => err instanceof SandboxError && err.message.length < 1000);
  answer = { status: 200, contentType: 'application/json', head: '[{"id":"', endlessMiB: 256 };
  await assert.rejects(ci.listContexts(), /GET \/contexts: the answer is larger than 4194304 bytes/);
});
