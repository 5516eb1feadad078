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
/** A ClientHello with post-quantum key shares is about 2 KB; this leaves room and bounds memory. */
const MAX_CLIENT_HELLO_BYTES = 64 * 1024;

export function peekClientHello(buf: Buffer): HelloPeek {
  const payloads: Buffer[] = [];
  let have = 0;
  for (let off = 0; ;) {
    if (off + 5 > buf.length) return tooBig(buf) ?? { state: 'incomplete' };
    if (buf[off] !== HANDSHAKE_RECORD) return { state: 'not_tls', detail: `the first bytes are not a TLS handshake record (0x${buf[off].toString(16)})` };
    const len = buf.readUInt16BE(off + 3);
    if (off + 5 + len > buf.length) return tooBig(buf) ?? { state: 'incomplete' };
    payloads.push(buf.subarray(off + 5, off + 5 + len));
    have += len;
    off += 5 + len;
    // The ClientHello may be split over several records.
    const hs = Buffer.concat(payloads, have);
    if (hs.length < 4) continue;
    if (hs[0] !== CLIENT_HELLO) return { state: 'not_tls', detail: `the first handshake message is not a ClientHello (type ${hs[0]})` };
    const bodyLen = hs.readUIntBE(1, 3);
    if (bodyLen > MAX_CLIENT_HELLO_BYTES) return { state: 'not_tls', detail: `ClientHello of ${bodyLen} bytes` };
    if (hs.length < 4 + bodyLen) continue;
    return parseClientHello(hs.subarray(4, 4 + bodyLen));
  }
}

function tooBig(buf: Buffer): HelloPeek | undefined {
  return buf.length > MAX_CLIENT_HELLO_BYTES + 1024 ? { state: 'not_tls', detail: 'no complete ClientHello in the first 65 KB' } : undefined;
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
