/**
 * The Jupyter messaging protocol's wire format (v5.3): a message is the ZMQ parts
 * [routing ids..., "<IDS|MSG>", HMAC signature, header, parent_header, metadata, content, buffers...],
 * signed with HMAC-SHA256 over the four JSON parts under the connection file's key.
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';

export const DELIMITER = Buffer.from('<IDS|MSG>');
const PROTOCOL_VERSION = '5.3';

interface JupyterHeader {
  msg_id: string;
  msg_type: string;
  session: string;
  username: string;
  date: string;
  version: string;
}

export interface JupyterMessage {
  header: JupyterHeader;
  /** Empty on a request; on a reply or broadcast, the header of the request it answers. */
  parent_header: Partial<JupyterHeader>;
  metadata: Record<string, unknown>;
  content: Record<string, unknown>;
}

export function newMessage(msgType: string, content: Record<string, unknown>, session: string): JupyterMessage {
  return {
    header: { msg_id: randomUUID(), msg_type: msgType, session, username: 'svc', date: new Date().toISOString(), version: PROTOCOL_VERSION },
    parent_header: {},
    metadata: {},
    content,
  };
}

export function sign(key: Buffer, parts: Buffer[]): string {
  const hmac = createHmac('sha256', key);
  for (const p of parts) hmac.update(p);
  return hmac.digest('hex');
}

/** The parts to send from a DEALER: no routing ids of our own. */
export function serialize(message: JupyterMessage, key: Buffer): Buffer[] {
  const body = [message.header, message.parent_header, message.metadata, message.content].map((p) => Buffer.from(JSON.stringify(p)));
  return [DELIMITER, Buffer.from(sign(key, body)), ...body];
}

export type WireError = { code: 'no_delimiter' | 'bad_signature' | 'bad_json'; message: string };

/** Reads received parts (any routing ids or PUB topic before the delimiter are skipped) and checks the signature. */
export function deserialize(parts: Buffer[], key: Buffer): JupyterMessage | WireError {
  const at = parts.findIndex((p) => p.equals(DELIMITER));
  if (at < 0 || parts.length < at + 6) return { code: 'no_delimiter', message: `a message of ${parts.length} parts without a complete Jupyter body` };
  const signature = parts[at + 1];
  const body = parts.slice(at + 2, at + 6);
  const expected = Buffer.from(sign(key, body));
  if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) return { code: 'bad_signature', message: 'the message signature does not match the key' };
  try {
    const [header, parent_header, metadata, content] = body.map((p) => JSON.parse(p.toString('utf8')) as Record<string, unknown>);
    return { header: header as unknown as JupyterHeader, parent_header, metadata, content };
  } catch (err) {
    return { code: 'bad_json', message: `a message part is not JSON: ${(err as Error).message}` };
  }
}

export function isWireError(v: JupyterMessage | WireError): v is WireError {
  return 'code' in v && !('header' in v);
}
