import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { warmUp } from './warm-up.ts';

test('the warm-up runs bash with no login or rc files: no template code before a hand-out', async (t) => {
  const bodies: Buffer[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => { bodies.push(Buffer.concat(chunks)); res.writeHead(200).end(); });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.after(() => server.close());
  await warmUp((server.address() as AddressInfo).port, () => {});
  const start = JSON.parse(bodies[0]!.subarray(5).toString('utf8')) as { process: { cmd: string; args: string[] } };
  assert.equal(start.process.cmd, '/bin/bash');
  assert.deepEqual(start.process.args, ['--noprofile', '--norc', '-c', 'true']);
  assert.ok(!start.process.args.includes('-l') && !start.process.args.includes('--login'));
});
