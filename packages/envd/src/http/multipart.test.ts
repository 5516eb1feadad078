import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MultipartReader, multipartBoundary, type PartHeaders } from './multipart.ts';

async function parse(body: Buffer, boundary: string, chunk: number) {
  const parts: { headers: PartHeaders; data: Buffer }[] = [];
  const reader = new MultipartReader(boundary, async (headers) => {
    const part = { headers, data: Buffer.alloc(0) };
    parts.push(part);
    return {
      write: async (d) => void (part.data = Buffer.concat([part.data, d])),
      end: async () => {},
    };
  });
  for (let i = 0; i < body.length; i += chunk) await reader.write(body.subarray(i, i + chunk));
  await reader.end();
  return parts;
}

test('multipart parts arrive intact across any chunking, including boundary-like data', async () => {
  const form = new FormData();
  const tricky = Buffer.concat([Buffer.from('\r\n--not-the-boundary\r\n'), Buffer.alloc(5000, 0x2d), Buffer.from('\r\n')]);
  form.append('file', new Blob([tricky]), 'dir/a "quoted".bin');
  form.append('other', 'ignored field');
  form.append('file', new Blob(['second file']), 'ünïcode.txt');
  form.append('file', new Blob([]), 'empty.txt');
  const req = new Request('http://x', { method: 'POST', body: form });
  const body = Buffer.from(await req.arrayBuffer());
  const boundary = multipartBoundary(req.headers.get('content-type')!);
  for (const chunk of [1, 3, 17, 100, 65536]) {
    const parts = await parse(body, boundary, chunk);
    assert.equal(parts.length, 4);
    assert.deepEqual(parts[0]!.headers, { name: 'file', filename: 'dir/a %22quoted%22.bin' });
    assert.ok(parts[0]!.data.equals(tricky), `chunk ${chunk}`);
    assert.equal(parts[1]!.headers.name, 'other');
    assert.equal(parts[2]!.headers.filename, 'ünïcode.txt');
    assert.equal(parts[2]!.data.toString(), 'second file');
    assert.equal(parts[3]!.data.length, 0);
  }
});

test('a body without the closing boundary is rejected', async () => {
  const body = Buffer.from('--b\r\nContent-Disposition: form-data; name="file"; filename="x"\r\n\r\nabc');
  await assert.rejects(parse(body, 'b', 4), /closing boundary/);
});

test('filename* (RFC 5987) wins over filename', async () => {
  const body = Buffer.from(`--b\r\nContent-Disposition: form-data; name="file"; filename="x"; filename*=UTF-8''%C3%A9t%C3%A9.txt\r\n\r\nabc\r\n--b--\r\n`);
  const parts = await parse(body, 'b', 5);
  assert.equal(parts[0]!.headers.filename, 'été.txt');
});
