import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { envelope, splitEnvelopes } from '../testing/connect-client.ts';
import { startEnvd, type RunningEnvd } from '../testing/envd-process.ts';
import { MAX_UNSENT_EVENTS } from './watch-stream.ts';

let envd: RunningEnvd;
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'envd-watch-slow-'));
  envd = await startEnvd({ ENVD_DEFAULT_USER: 'root' });
});
after(async () => {
  await envd.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Opens WatchDir and answers once its first bytes (the start event) arrived, the response paused. */
function openWatch(path: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const body = envelope(0, Buffer.from(JSON.stringify({ path, recursive: false, includeEntry: true })));
    const req = request(`${envd.url}/filesystem.Filesystem/WatchDir`, { method: 'POST', headers: { 'content-type': 'application/connect+json', 'content-length': body.length } }, (res) => {
      res.once('data', (first: Buffer) => {
        res.pause();
        res.unshift(first);
        resolve(res);
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('a WatchDir client that does not read is cut off with resource_exhausted, not buffered without end', async () => {
  const res = await openWatch(dir);
  // Long names make each event large, so that the socket's buffers (a few MB on loopback) fill
  // with fewer of them and the limit is reached soon after.
  const stem = 'n'.repeat(200);
  const files = MAX_UNSENT_EVENTS * 3;
  for (let i = 0; i < files; i += 500) {
    await Promise.all(Array.from({ length: 500 }, (_, k) => writeFile(join(dir, `${stem}-${i + k}`), '')));
  }
  const chunks: Buffer[] = [];
  const ended = new Promise<void>((resolve) => res.on('end', resolve));
  res.on('data', (c: Buffer) => chunks.push(c));
  res.resume();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([ended, new Promise((r) => { timer = setTimeout(r, 20_000); })]);
  clearTimeout(timer);
  const body = Buffer.concat(chunks);
  const envelopes = splitEnvelopes(body.subarray(0, lastWhole(body)));
  const last = envelopes.at(-1)!;
  assert.ok(last.flags & 2, `the stream ended (${envelopes.length} messages read, none an end-stream message)`);
  const end = JSON.parse(last.data.toString()) as { error?: { code: string; message: string } };
  assert.equal(end.error?.code, 'resource_exhausted');
  assert.match(end.error.message, /fell more than 10000 events behind/);
  assert.ok(envelopes.length < files, `${envelopes.length} events were sent for ${files} files`);
  assert.equal((await fetch(`${envd.url}/health`)).status, 204);
});

/** The length of the whole envelopes at the start of `body`. */
function lastWhole(body: Buffer): number {
  let offset = 0;
  while (offset + 5 <= body.length && offset + 5 + body.readUInt32BE(offset + 1) <= body.length) offset += 5 + body.readUInt32BE(offset + 1);
  return offset;
}
