/**
 * Reads the server name (SNI) from the first bytes of a TLS connection, before any TLS library
 * sees them: the proxy must pick the leaf certificate, and without SNI first find the original
 * destination, which happens asynchronously and so cannot run inside OpenSSL's callbacks.
 */
export type HelloPeek =
  | { state: 'incomplete' }
  /** Not a TLS ClientHello, malformed, or larger than any ClientHello should be. */
  | { state: 'not_tls'; detail: string }
  | { state: 'complete'; serverName?: string };

const HANDSHAKE_RECORD = 22;
const CLIENT_HELLO = 1;
const SERVER_NAME_EXTENSION = 0;
const HOST_NAME = 0;
/**
 * Records a ClientHello may span. A real one fits one record (16 KB) and rarely takes two; a
 * client that sends many small ones only makes the proxy work (RFC 8446 5.1 allows
 * fragmentation, no client needs it at this scale). docs/egress.md "How traffic reaches the proxy".
 */
export const MAX_CLIENT_HELLO_RECORDS = 8;
/**
 * A ClientHello with post-quantum key shares is about 2 KB; one TLS record's payload (16 KB)
 * leaves room. It bounds what a connection holds for the 10 s a handshake may take: at 64 KB
 * (buffers doubling to 128 KB) 1,500 connections held 236 MiB, and one sandbox's 8,192
 * connections about 1.3 GB of a worker (2026-12-01).
 */
export const MAX_CLIENT_HELLO_BYTES = 16 * 1024;
/** The bytes read before giving up: the largest ClientHello, its handshake header and its records' headers. */
export const MAX_BUFFERED_BYTES = MAX_CLIENT_HELLO_BYTES + 4 + 5 * MAX_CLIENT_HELLO_RECORDS;

/**
 * Reads a connection's first bytes as they come, each byte once: every chunk is appended once,
 * and each record's payload is taken when the record is whole, so that a ClientHello trickled in
 * many small writes costs no more than one sent whole. (It was parsed again from the start on
 * every chunk, with the records concatenated once per record: 13,000 empty records in 66 KB took
 * the worker about 88 million steps per chunk, stalling every sandbox it served.)
 */
export class ClientHelloReader {
  private raw: Buffer = Buffer.alloc(0);
  private rawLength = 0;
  /** Where the next record's header starts in `raw`. */
  private next = 0;
  private handshake: Buffer = Buffer.alloc(0);
  private handshakeLength = 0;
  private records = 0;
  private result: HelloPeek = { state: 'incomplete' };

  /** The bytes the reader's buffers take (tests: what a connection mid-ClientHello holds). */
  get heldBytes(): number {
    return this.raw.length + this.handshake.length;
  }

  /** Everything read so far, to be handed back to the socket for the TLS library. */
  bytes(): Buffer {
    return this.raw.subarray(0, this.rawLength);
  }

  /** Takes the next bytes of the connection; once not incomplete, the answer stays the same. */
  push(chunk: Buffer): HelloPeek {
    if (this.result.state !== 'incomplete') return this.result;
    // Whole, even past the ClientHello: every byte read goes back to the socket for TLS. A chunk
    // that takes the bytes past the bound ends the reading here (complete, or refused): what a
    // connection holds while it waits for more is at most the bound.
    this.raw = append(this.raw, this.rawLength, chunk, MAX_BUFFERED_BYTES);
    this.rawLength += chunk.length;
    this.result = this.readRecords();
    if (this.result.state === 'incomplete' && this.rawLength > MAX_BUFFERED_BYTES) {
      this.result = { state: 'not_tls', detail: `no complete ClientHello in the first ${MAX_BUFFERED_BYTES} bytes` };
    }
    return this.result;
  }

  private readRecords(): HelloPeek {
    const buf = this.raw;
    while (this.next + 5 <= this.rawLength) {
      const off = this.next;
      if (buf[off] !== HANDSHAKE_RECORD) return { state: 'not_tls', detail: `the first bytes are not a TLS handshake record (0x${buf[off].toString(16)})` };
      const len = buf.readUInt16BE(off + 3);
      // RFC 8446 5.1: "Implementations MUST NOT send zero-length fragments of Handshake types".
      if (len === 0) return { state: 'not_tls', detail: 'an empty handshake record' };
      if (off + 5 + len > this.rawLength) return { state: 'incomplete' };
      if (++this.records > MAX_CLIENT_HELLO_RECORDS) return { state: 'not_tls', detail: `a ClientHello over more than ${MAX_CLIENT_HELLO_RECORDS} records` };
      this.handshake = append(this.handshake, this.handshakeLength, buf.subarray(off + 5, off + 5 + len), MAX_BUFFERED_BYTES);
      this.handshakeLength += len;
      this.next = off + 5 + len;
      const peek = this.readHandshake();
      if (peek.state !== 'incomplete') return peek;
    }
    return { state: 'incomplete' };
  }

  private readHandshake(): HelloPeek {
    const hs = this.handshake;
    if (this.handshakeLength < 4) return { state: 'incomplete' };
    if (hs[0] !== CLIENT_HELLO) return { state: 'not_tls', detail: `the first handshake message is not a ClientHello (type ${hs[0]})` };
    const bodyLen = hs.readUIntBE(1, 3);
    if (bodyLen > MAX_CLIENT_HELLO_BYTES) return { state: 'not_tls', detail: `ClientHello of ${bodyLen} bytes` };
    if (this.handshakeLength < 4 + bodyLen) return { state: 'incomplete' };
    return parseClientHello(hs.subarray(4, 4 + bodyLen));
  }
}

/** The ClientHello of bytes read whole (the reader's answer for them). */
export function peekClientHello(buf: Buffer): HelloPeek {
  return new ClientHelloReader().push(buf);
}

/**
 * `data` written after the first `used` bytes of `buf`, which grows by doubling (each byte is
 * copied O(1) times) but not past `cap` unless the bytes themselves are more: then exactly them.
 */
function append(buf: Buffer, used: number, data: Buffer, cap: number): Buffer {
  const needed = used + data.length;
  if (needed > buf.length) {
    const grown = Buffer.allocUnsafe(Math.max(needed, Math.min(Math.max(buf.length * 2, 512), cap)));
    buf.copy(grown, 0, 0, used);
    buf = grown;
  }
  data.copy(buf, used);
  return buf;
}

function parseClientHello(body: Buffer): HelloPeek {
  const r = new Reader(body);
  try {
    r.skip(2 + 32); // legacy_version, random
    r.skip(r.u8()); // legacy_session_id
    r.skip(r.u16()); // cipher_suites
    r.skip(r.u8()); // legacy_compression_methods
    if (r.left === 0) return { state: 'complete' };
    const extensions = new Reader(r.take(r.u16()));
    while (extensions.left > 0) {
      const type = extensions.u16();
      const data = extensions.take(extensions.u16());
      if (type !== SERVER_NAME_EXTENSION) continue;
      const list = new Reader(data);
      const names = new Reader(list.take(list.u16()));
      while (names.left > 0) {
        const nameType = names.u8();
        const name = names.take(names.u16());
        if (nameType === HOST_NAME) return { state: 'complete', serverName: name.toString('latin1') };
      }
    }
    return { state: 'complete' };
  } catch (err) {
    return { state: 'not_tls', detail: `malformed ClientHello: ${(err as Error).message}` };
  }
}

class Reader {
  private off = 0;
  constructor(private readonly buf: Buffer) {}
  get left(): number { return this.buf.length - this.off; }
  u8(): number { return this.take(1)[0]; }
  u16(): number { return this.take(2).readUInt16BE(0); }
  skip(n: number): void { this.take(n); }
  take(n: number): Buffer {
    if (n > this.left) throw new Error(`field of ${n} bytes where ${this.left} remain`);
    const out = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return out;
  }
}
