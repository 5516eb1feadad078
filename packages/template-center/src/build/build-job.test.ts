/**
 * A registry build end to end (buildArtifact) against a registry stand-in that serves whatever a
 * test gives it: descriptors without a size are refused before anything is downloaded, a layer
 * is held to its declared size as it arrives, and what a failed build says names no path of the
 * template center's host.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import { silentLogger } from '@svc/common';
import type { BuildRequest } from '@svc/contracts/template-center';
import { BlobCache } from '../blobs/blob-cache.ts';
import type { BuildContext } from './build-context.ts';
import { explain } from './build-error.ts';
import { buildArtifact } from './build-job.ts';
import type { ProgressReporter } from './progress-reporter.ts';

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const LAYER = 'application/vnd.oci.image.layer.v1.tar+gzip';

/** What the stand-in serves: manifests by tag, blobs by digest; a blob may be a function that answers itself. */
const manifests = new Map<string, string>();
const blobs = new Map<string, Buffer>();
const blobGets: string[] = [];
let server: Server;
let registry: string;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tc-build-job-'));
  server = createServer((req, res) => {
    const m = /^\/v2\/test\/img\/(manifests|blobs)\/(.+)$/.exec(req.url ?? '');
    if (m?.[1] === 'manifests' && manifests.has(m[2])) { res.writeHead(200, { 'content-type': MANIFEST }).end(manifests.get(m[2])); return; }
    if (m?.[1] === 'blobs') {
      blobGets.push(m[2]);
      const data = blobs.get(m[2]);
      if (data) { res.end(data); return; }
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  registry = `127.0.0.1:${(server.address() as { port: number }).port}`;
});

after(() => {
  server.closeAllConnections();
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An image of `layers` (their bytes and the sizes their descriptors declare) under `tag`. */
function serve(tag: string, layers: Array<{ data: Buffer; size?: unknown }>, configSize?: unknown): void {
  const config = Buffer.from(JSON.stringify({ os: 'linux', architecture: process.arch === 'arm64' ? 'arm64' : 'amd64' }));
  blobs.set(sha(config), config);
  for (const l of layers) blobs.set(sha(l.data), l.data);
  manifests.set(tag, JSON.stringify({
    schemaVersion: 2, mediaType: MANIFEST,
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha(config), ...(configSize === undefined ? { size: config.length } : configSize === null ? {} : { size: configSize }) },
    layers: layers.map((l) => ({ mediaType: LAYER, digest: sha(l.data), ...(l.size === undefined ? {} : { size: l.size }) })),
  }));
}

const progress = { setLayers() {}, setMessage() {}, addLayerBytes() {}, markLayerCached() {} } as unknown as ProgressReporter;

async function build(tag: string, o: { maxImageBytes?: number } = {}) {
  const cache = new BlobCache({ dir: join(dir, 'blobs'), maxBytes: 1 << 30, logger: silentLogger() });
  await cache.init();
  const req = { jobId: `job-${tag}`, templateId: 't', specHash: tag, artifactId: `art-${tag}`, diskSizeMB: 0, withSvcCa: false, source: { kind: 'registry', ref: `${registry}/test/img:${tag}`, insecure: true } } as BuildRequest;
  const ctx = {
    store: { scratchDir: join(dir, 'scratch'), kind: 'local' }, workDir: join(dir, 'work'), blobs: cache, hostRegistries: ['*'],
    maxImageBytes: o.maxImageBytes ?? 1 << 30, logger: silentLogger(), progress, signal: new AbortController().signal, onPhase() {},
  } as unknown as BuildContext;
  const err = await buildArtifact(req, ctx).then(() => assert.fail('the build should fail'), (e: unknown) => explain(e, 'building'));
  return { message: err.message, tmp: readdirSync(join(dir, 'blobs', 'tmp')) };
}

test('a layer or config descriptor without a valid size is refused, naming its digest, before any layer is downloaded', async () => {
  const layer = gzipSync(randomBytes(1000));
  for (const [tag, size] of [['absent', undefined], ['negative', -1], ['fraction', 10.5], ['text', '1000'], ['huge', 2 ** 60]] as const) {
    serve(tag, [{ data: layer, size }]);
    blobGets.length = 0;
    const { message } = await build(tag);
    assert.equal(message, `${registry}/test/img:${tag}: the layer ${sha(layer)} has no valid size in its manifest (${JSON.stringify(size ?? null)}); its download could not be held to one`, tag);
    assert.ok(!blobGets.includes(sha(layer)), `${tag}: the layer was not asked for`);
  }
  serve('config', [{ data: layer, size: layer.length }], null);
  assert.match((await build('config')).message, /^.*: the config sha256:[0-9a-f]{64} has no valid size in its manifest \(null\)/);
});

test('a layer that sends more than its declared size is stopped there, and nothing of it is kept', async () => {
  const big = randomBytes(4 * 1_048_576);
  serve('liar', [{ data: big, size: 1000 }]);
  const { message, tmp } = await build('liar');
  assert.match(message, /^layer sha256:[0-9a-f]{64} is larger than its manifest says \(1000 bytes\): digest mismatch$/);
  assert.deepEqual(tmp, []);
});

test('what a failed build says names no directory of the template center\'s host', async () => {
  const notATar = gzipSync(randomBytes(4096));
  serve('not-a-tar', [{ data: notATar, size: notATar.length }]);
  const { message } = await build('not-a-tar');
  assert.match(message, /^unpacking layer 1\/1 sha256:[0-9a-f]{12} failed: /);
  assert.ok(!message.includes(dir), message);
});
