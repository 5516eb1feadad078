import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';

type Compression = 'gzip' | 'zstd' | 'none';

const GZIP_MAGIC = [0x1f, 0x8b];
const ZSTD_MAGIC = [0x28, 0xb5, 0x2f, 0xfd];

function sniffCompression(head: Buffer): Compression {
  const starts = (m: number[]) => head.length >= m.length && m.every((b, i) => head[i] === b);
  if (starts(GZIP_MAGIC)) return 'gzip';
  if (starts(ZSTD_MAGIC)) return 'zstd';
  return 'none';
}

/**
 * Decompresses a layer stream, recognising gzip and zstd by their magic bytes rather than by
 * media type: docker archives and rootfs tarballs carry no media type, and registries are not
 * always truthful about it. zstd goes through the `zstd` command.
 */
export async function decompress(input: Readable): Promise<Readable> {
  const it = input[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const headChunks: Buffer[] = [];
  let headLen = 0;
  let ended = false;
  while (headLen < 4) {
    const r = await it.next();
    if (r.done) { ended = true; break; }
    headChunks.push(r.value);
    headLen += r.value.length;
  }
  const head = Buffer.concat(headChunks);
  const rest = Readable.from((async function* () {
    if (head.length) yield head;
    if (ended) return;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value;
    }
  })(), { objectMode: false });

  switch (sniffCompression(head)) {
    case 'gzip': {
      const gunzip = createGunzip({ chunkSize: 256 * 1024 });
      pipeline(rest, gunzip).catch((err) => gunzip.destroy(err));
      return gunzip;
    }
    case 'zstd': return zstdDecompress(rest);
    case 'none': return rest;
  }
}

function zstdDecompress(input: Readable): Readable {
  const child = spawn('zstd', ['-d', '-c', '-q'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const out = child.stdout;
  let stderr = '';
  child.stderr.on('data', (d) => { if (stderr.length < 2000) stderr += d; });
  child.on('error', (err) => out.destroy(new Error(`cannot run zstd: ${err.message}`)));
  child.on('close', (code, sig) => {
    if (code !== 0 && !out.destroyed) out.destroy(new Error(`zstd decompression failed: ${stderr.trim() || `exit ${code ?? sig}`}`));
  });
  pipeline(input, child.stdin).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') out.destroy(err);
  });
  // A consumer that stops early must not leave zstd behind.
  out.on('close', () => { if (child.exitCode === null) child.kill('SIGKILL'); });
  return out;
}
