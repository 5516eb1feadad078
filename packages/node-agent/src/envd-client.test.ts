import assert from 'node:assert/strict';
import http from 'node:http';
import { after, test } from 'node:test';
import { ENVD_PORT } from '@svc/contracts/envd-port';
import { envdHealthy, envdRequest, MAX_ENVD_ANSWER } from './envd-client.ts';
import { execThroughEnvd } from './runtime/microvm/envd-exec.ts';

/** A stand-in for envd that a sandbox's root could run on envd's port. */
async function fakeEnvd(address: string, handler: http.RequestListener): Promise<http.Server> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(ENVD_PORT, address, () => r()));
  after(() => { server.closeAllConnections(); server.close(); });
  return server;
}

/** Answers with a body that never ends, as fast as the socket takes it. */
const flood = (status: number): http.RequestListener => (req, res) => {
  const chunk = Buffer.alloc(1 << 20, 'a');
  res.writeHead(status);
  const pump = () => { while (!res.destroyed && res.write(chunk)) { /* until the socket is full */ } };
  res.on('drain', pump);
  req.socket.on('close', () => res.destroy());
  pump();
};

test('an envd answer that never ends is cut at the cap, with an error that says so', async () => {
  await fakeEnvd('127.0.0.71', flood(200));
  const started = Date.now();
  await assert.rejects(envdRequest('127.0.0.71', 'GET', '/health', { timeoutMs: 10_000 }), new RegExp(`past ${MAX_ENVD_ANSWER} bytes`));
  assert.ok(Date.now() - started < 2_000, 'cut at the cap, not at the deadline');
  assert.equal(await envdHealthy('127.0.0.71', 1_000), false);
});

test('an envd answer that trickles is cut at the deadline of the whole request', async () => {
  await fakeEnvd('127.0.0.72', (req, res) => {
    res.writeHead(200);
    const t = setInterval(() => res.write('a'), 20);
    req.socket.on('close', () => clearInterval(t));
  });
  const started = Date.now();
  await assert.rejects(envdRequest('127.0.0.72', 'GET', '/health', { timeoutMs: 300 }), /no answer within 300 ms/);
  assert.ok(Date.now() - started < 2_000);
});

test('a small answer is read whole', async () => {
  await fakeEnvd('127.0.0.73', (_req, res) => res.writeHead(204).end());
  assert.equal(await envdHealthy('127.0.0.73'), true);
});

test('a Process.Start refusal that never ends is cut at the cap', async () => {
  await fakeEnvd('127.0.0.74', flood(500));
  await assert.rejects(execThroughEnvd({ address: '127.0.0.74' }, ['true'], { timeoutMs: 10_000 }), /past \d+ bytes/);
});

test('a Process.Start frame that is not JSON fails the exec and leaves the process standing', async () => {
  await fakeEnvd('127.0.0.75', (_req, res) => {
    const body = Buffer.from('{not json');
    const envelope = Buffer.alloc(5);
    envelope.writeUInt32BE(body.length, 1);
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    res.write(Buffer.concat([envelope, body]));
  });
  await assert.rejects(execThroughEnvd({ address: '127.0.0.75' }, ['true'], { timeoutMs: 10_000 }), /not JSON/);
});
