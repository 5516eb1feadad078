/**
 * Just enough DER (ITU-T X.690) to write X.509 certificates and to read the few fields of one
 * that signing a leaf needs (issuer name, validity end, key identifier). Values are Buffers of
 * complete TLVs, so writers nest by concatenation.
 */

const TAG = {
  boolean: 0x01,
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  null: 0x05,
  oid: 0x06,
  utf8String: 0x0c,
  ia5String: 0x16,
  utcTime: 0x17,
  generalizedTime: 0x18,
  sequence: 0x30,
  set: 0x31,
} as const;

function tlv(tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), encodeLength(content.length), content]);
}

function encodeLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

export const sequence = (...items: Buffer[]) => tlv(TAG.sequence, Buffer.concat(items));
export const set = (...items: Buffer[]) => tlv(TAG.set, Buffer.concat(items));
export const nullValue = () => tlv(TAG.null, Buffer.alloc(0));
export const boolean = (v: boolean) => tlv(TAG.boolean, Buffer.from([v ? 0xff : 0x00]));
export const octetString = (v: Buffer) => tlv(TAG.octetString, v);
export const utf8String = (v: string) => tlv(TAG.utf8String, Buffer.from(v, 'utf8'));
const ia5String = (v: string) => tlv(TAG.ia5String, Buffer.from(v, 'ascii'));

/** A non-negative INTEGER from its big-endian magnitude, in the minimal two's-complement form. */
export function unsignedInteger(magnitude: Buffer | number): Buffer {
  let bytes = typeof magnitude === 'number' ? numberBytes(magnitude) : magnitude;
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  bytes = bytes.subarray(start);
  if (bytes.length === 0) bytes = Buffer.from([0]);
  if (bytes[0] & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
  return tlv(TAG.integer, bytes);
}

function numberBytes(n: number): Buffer {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`DER integer must be a non-negative safe integer, not ${n}`);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from(bytes.length ? bytes : [0]);
}

/** A BIT STRING of whole bytes (keys, signatures). */
export function bitString(bytes: Buffer, unusedBits = 0): Buffer {
  return tlv(TAG.bitString, Buffer.concat([Buffer.from([unusedBits]), bytes]));
}

/**
 * A named-bit BIT STRING (KeyUsage): bit 0 is the most significant bit of the first byte, and
 * DER drops trailing zero bits.
 */
export function namedBits(bits: number[]): Buffer {
  const highest = Math.max(...bits);
  const bytes = Buffer.alloc(Math.floor(highest / 8) + 1);
  for (const b of bits) bytes[Math.floor(b / 8)] |= 0x80 >> (b % 8);
  return bitString(bytes, 7 - (highest % 8));
}

export function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number);
  if (parts.length < 2 || parts.some((p) => !Number.isSafeInteger(p) || p < 0)) throw new Error(`bad OID ${dotted}`);
  const out: number[] = [parts[0] * 40 + parts[1]];
  for (const part of parts.slice(2)) {
    const chunk: number[] = [part & 0x7f];
    for (let v = Math.floor(part / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift((v & 0x7f) | 0x80);
    out.push(...chunk);
  }
  return tlv(TAG.oid, Buffer.from(out));
}

/** UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5). */
export function time(d: Date): Buffer {
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-:T]/g, '');
  const year = d.getUTCFullYear();
  return year < 2050 ? tlv(TAG.utcTime, Buffer.from(`${digits.slice(2)}Z`, 'ascii')) : tlv(TAG.generalizedTime, Buffer.from(`${digits}Z`, 'ascii'));
}

/** [n] EXPLICIT: a constructed context tag around complete values. */
export const explicit = (n: number, ...items: Buffer[]) => tlv(0xa0 | n, Buffer.concat(items));
/** [n] IMPLICIT of a primitive value: the content under a context tag. */
export const implicitPrimitive = (n: number, content: Buffer) => tlv(0x80 | n, content);

// ---- reading ----

export interface Tlv {
  tag: number;
  /** The whole element, header included. */
  raw: Buffer;
  content: Buffer;
}

/** Reads the element at `offset`; throws on truncated or indefinite-length input. */
export function readTlv(buf: Buffer, offset = 0): Tlv & { end: number } {
  if (offset + 2 > buf.length) throw new Error('DER: truncated element');
  const tag = buf[offset];
  let len = buf[offset + 1];
  let headerLen = 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4) throw new Error('DER: unsupported length form');
    if (offset + 2 + n > buf.length) throw new Error('DER: truncated length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[offset + 2 + i];
    headerLen += n;
  }
  const end = offset + headerLen + len;
  if (end > buf.length) throw new Error('DER: element runs past the end of its input');
  return { tag, raw: buf.subarray(offset, end), content: buf.subarray(offset + headerLen, end), end };
}

/** The elements inside a constructed value. */
export function children(content: Buffer): Tlv[] {
  const out: Tlv[] = [];
  for (let off = 0; off < content.length;) {
    const t = readTlv(content, off);
    out.push(t);
    off = t.end;
  }
  return out;
}

export function decodeOid(content: Buffer): string {
  const parts = [Math.floor(content[0] / 40), content[0] % 40];
  let v = 0;
  for (const byte of content.subarray(1)) {
    v = v * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) { parts.push(v); v = 0; }
  }
  return parts.join('.');
}

export const DER_TAGS = TAG;
