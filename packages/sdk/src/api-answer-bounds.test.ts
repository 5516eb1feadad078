/**
 * What the SDK reads of the API's answers and of an upload URL's errors is bounded: an answer
 * without end (a broken proxy, a wrong apiUrl, an upload URL that points anywhere) once grew the
 * caller until it fell over.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ApiClient } from './api-client.ts';
import { planFromDockerfile } from './dockerfile.ts';
import { SandboxError } from './errors.ts';
import { buildTemplate } from './template-build.ts';

const MiB = 1024 * 1024;
let server: Server;
let base: string;

/** Writes 1 MiB chunks, `count` of them (or until the reader goes away when Infinity). */
function stream(res: ServerResponse, count: number): void {
  const chunk = Buffer.alloc(MiB, 0x20);
  let sent = 0;
  const more = () => {
    while (sent < count) {
      sent++;
      if (!res.write(chunk)) { res.once('drain', more); return; }
    }
    res.end();
  };
  res.on('close', () => { sent = count; });
  more();
}

before(async () => {
  server = createServer((req, res) => {
    req.resume();
    if (req.url?.startsWith('/v2/sandboxes')) { res.writeHead(200, { 'content-type': 'application/json' }); stream(res, 65); return; }
    if (req.method === 'POST' && req.url === '/v3/templates') { res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ templateID: 't1', buildID: 'b1' })); return; }
    if (req.url?.startsWith('/templates/t1/files/')) { res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ present: false, url: `${base}/upload` })); return; }
    if (req.url === '/upload') { res.writeHead(500, { 'content-type': 'text/plain' }); stream(res, Infinity); return; }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => { server.closeAllConnections(); return new Promise<void>((resolve) => server.close(() => resolve())); });

const within = <T>(p: Promise<T>, ms: number) => Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`no answer within ${ms} ms: the body was read without a bound`)), ms).unref())]);

test('an API answer past 64 MiB is refused as too_large, with a message that names the call', async () => {
  const api = new ApiClient({ apiUrl: base, apiKey: 'k' });
  await assert.rejects(within(api.call('GET', '/v2/sandboxes', {}), 30_000), (e: unknown) => e instanceof SandboxError && e.code === 'too_large' && /^GET \/v2\/sandboxes: the answer is larger than 67108864 bytes/.test((e as Error).message));
});

test('an upload URL\'s error answer is read only to its head', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-sdk-upload-'));
  try {
    writeFileSync(join(dir, 'a.txt'), 'a');
    const plan = planFromDockerfile('FROM e2bdev/base\nCOPY a.txt /a.txt\n');
    await assert.rejects(within(buildTemplate(plan, 'n', { apiUrl: base, apiKey: 'k', contextDir: dir }), 20_000), /uploading the build context answered 500: {10}/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
