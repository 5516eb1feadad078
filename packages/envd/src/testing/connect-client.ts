import { create, fromBinary, fromJsonString, toBinary, toJsonString, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';

/** A bare Connect client for tests that check the wire format itself. */
export interface RawResponse {
  status: number;
  headers: Headers;
  body: Buffer;
}

export async function post(url: string, body: Uint8Array | string, headers: Record<string, string>): Promise<RawResponse> {
  const res = await fetch(url, { method: 'POST', body, headers });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

export function envelope(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + data.length);
  out[0] = flags;
  out.writeUInt32BE(data.length, 1);
  out.set(data, 5);
  return out;
}

export function splitEnvelopes(body: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  let offset = 0;
  while (offset < body.length) {
    const size = body.readUInt32BE(offset + 1);
    out.push({ flags: body[offset]!, data: body.subarray(offset + 5, offset + 5 + size) });
    offset += 5 + size;
  }
  return out;
}

export function encode<S extends DescMessage>(schema: S, message: MessageInitShape<S>, binary: boolean): Uint8Array | string {
  const msg = create(schema, message);
  return binary ? toBinary(schema, msg) : toJsonString(schema, msg);
}

export function decode<S extends DescMessage>(schema: S, data: Uint8Array, binary: boolean): MessageShape<S> {
  return binary ? fromBinary(schema, data) : fromJsonString(schema, Buffer.from(data).toString('utf8'));
}

/** Reads a server stream: its messages and the end-stream JSON. */
export function readStream<S extends DescMessage>(schema: S, body: Buffer, binary: boolean): { messages: MessageShape<S>[]; end: { error?: { code: string; message: string } } } {
  const envelopes = splitEnvelopes(body);
  const last = envelopes.pop();
  if (!last || !(last.flags & 2)) throw new Error('stream did not finish with an end-stream message');
  return {
    messages: envelopes.map((e) => decode(schema, e.data, binary)),
    end: JSON.parse(last.data.toString('utf8')) as { error?: { code: string; message: string } },
  };
}

/** Opens a server stream and yields its messages as they arrive (end-stream errors throw). */
export async function* openStream<S extends DescMessage>(
  url: string,
  schema: S,
  body: Uint8Array | string,
  headers: Record<string, string>,
  binary: boolean,
  signal?: AbortSignal,
): AsyncGenerator<MessageShape<S>> {
  const data = typeof body === 'string' ? Buffer.from(body) : body;
  const res = await fetch(url, {
    method: 'POST',
    body: envelope(0, data),
    headers: { 'content-type': `application/connect+${binary ? 'proto' : 'json'}`, ...headers },
    signal,
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let pending = Buffer.alloc(0);
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
      const size = pending.readUInt32BE(1);
      const flags = pending[0]!;
      const payload = pending.subarray(5, 5 + size);
      pending = pending.subarray(5 + size);
      if (flags & 2) {
        const end = JSON.parse(payload.toString('utf8')) as { error?: { code: string; message: string } };
        if (end.error) throw Object.assign(new Error(end.error.message), { code: end.error.code });
        return;
      }
      yield decode(schema, payload, binary);
    }
  }
  throw new Error('stream ended without an end-stream message');
}
