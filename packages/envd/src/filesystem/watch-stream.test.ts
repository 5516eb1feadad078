import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
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
function openWatch(path: string, recursive = false): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const body = envelope(0, Buffer.from(JSON.stringify({ path, recursive, includeEntry: true })));
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

test('a subtree of more than MAX_UNSENT_EVENTS entries moved in at once reaches a client that reads', async () => {
  // Made outside the watched directory, then moved in: one batch of all its entries.
  const outside = await mkdtemp(join(tmpdir(), 'envd-watch-tree-'));
  const watched = join(dir, 'project');
  await mkdir(watched);
  const files = MAX_UNSENT_EVENTS + 2_000;
  const tree = join(outside, 'node_modules');
  await mkdir(tree);
  for (let i = 0; i < files; i += 500) {
    await Promise.all(Array.from({ length: 500 }, (_, k) => writeFile(join(tree, `package-${i + k}.js`), '')));
  }
  const res = await openWatch(watched, true);
  let received = Buffer.alloc(0);
  let events = 0;
  let ended: { error?: { code: string; message: string } } | undefined;
  const read = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 30_000);
    res.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const whole = lastWhole(received);
      for (const e of splitEnvelopes(received.subarray(0, whole))) {
        if (e.flags & 2) ended = JSON.parse(e.data.toString()) as typeof ended;
        else if ((JSON.parse(e.data.toString()) as { filesystem?: unknown }).filesystem) events++;
      }
      received = received.subarray(whole);
      if (ended || events > files) {
        clearTimeout(timer);
        resolve();
      }
    });
    res.on('end', () => { clearTimeout(timer); resolve(); });
  });
  res.resume();
  try {
    await rename(tree, join(watched, 'node_modules'));
    await read;
    assert.equal(ended?.error, undefined, `the stream ended: ${JSON.stringify(ended)}`);
    assert.ok(events > files, `${events} events arrived for ${files} files and their directory`);
  } finally {
    res.destroy();
    await rm(outside, { recursive: true, force: true });
  }
});

/** The length of the whole envelopes at the start of `body`. */
function lastWhole(body: Buffer): number {
  let offset = 0;
  while (offset + 5 <= body.length && offset + 5 + body.readUInt32BE(offset + 1) <= body.length) offset += 5 + body.readUInt32BE(offset + 1);
  return offset;
}
