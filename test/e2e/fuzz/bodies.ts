/** Request bodies that are not a JSON value: malformed JSON, oversized, Connect envelopes, uploads. */
import type { Rng } from './random.ts';
import { jsonText, MB, type Json } from './values.ts';

export const MALFORMED_JSON: readonly Buffer[] = [
  '{', '{"a":}', "{'a':1}", '[1,2,', 'nul', '{"a":1}}', '{"a":1,}', '\ufeff{}', '{"a":"\u0000"}', 'NaN', '{"a":NaN}',
  '{"a":undefined}', '// comment\n{}', '"unterminated', '{"a":1}garbage', '\u0000\u0000\u0000\u0000',
].map((s) => Buffer.from(s, 'utf8')).concat([Buffer.from([0xff, 0xfe, 0x7b, 0x7d]), Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d])]);

export const ODD_CONTENT_TYPES: readonly (string | undefined)[] = [
  undefined, '', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', 'application/json; charset=utf-16',
  'APPLICATION/JSON', 'application/json, text/plain', 'application/vnd.api+json', 'application/jsonx', 'application/octet-stream',
  'application/json; boundary=x; charset=\u00ff',
];

/** A body just over `limit` bytes (or 11 MB): valid JSON, or JSON that never closes. */
export function oversizeBody(rng: Rng, base: Json, limit: number): { body: Buffer; note: string } {
  const size = rng.chance(0.2) ? 11 * MB : limit + 100 * 1024;
  const valid = rng.chance(0.5);
  const pad = 'x'.repeat(size);
  const obj = base !== null && typeof base === 'object' && !Array.isArray(base) ? base : {};
  const text = valid ? jsonText({ ...(obj as Record<string, Json>), pad }) : `{"pad":"${pad}`;
  return { body: Buffer.from(text), note: `oversize ${valid ? 'valid' : 'invalid'} JSON, ${Math.round(text.length / 1024)} KB` };
}

// ------------------------------------------------------------------ Connect

/** One Connect stream envelope: flags, big-endian length, data. */
export function envelope(data: Buffer, flags = 0, declaredLength = data.length): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(declaredLength >>> 0, 1);
  return Buffer.concat([head, data]);
}

/** A broken envelope stream around `message` (bad length, flags, truncation, several messages). */
export function brokenEnvelopes(rng: Rng, message: Buffer): { body: Buffer; note: string } {
  switch (rng.int(0, 7)) {
    case 0: return { body: envelope(message, 0, message.length + 100), note: 'envelope length longer than the data' };
    case 1: return { body: envelope(message, 0, 0xffffffff), note: 'envelope length 4 GB' };
    case 2: return { body: envelope(message, 0x02), note: 'end-stream flag from the client' };
    case 3: return { body: envelope(message, 0x01), note: 'compressed flag without an encoding' };
    case 4: return { body: envelope(message).subarray(0, 3), note: 'truncated envelope head' };
    case 5: return { body: Buffer.concat([envelope(message), envelope(message), envelope(message)]), note: 'three messages' };
    case 6: return { body: Buffer.alloc(0), note: 'no message at all' };
    default: return { body: envelope(Buffer.from('{"not":"the schema"'), 0xff), note: 'all flags set, broken JSON' };
  }
}

// ------------------------------------------------------------------ envd uploads

export function multipart(boundary: string, parts: { name: string; filename?: string; content: Buffer; headers?: string }[]): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disp = `form-data; name="${p.name}"${p.filename === undefined ? '' : `; filename="${p.filename}"`}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disp}\r\n${p.headers ?? 'Content-Type: application/octet-stream\r\n'}\r\n`, 'latin1'), p.content, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}
