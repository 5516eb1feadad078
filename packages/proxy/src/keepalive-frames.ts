/**
 * envd's keepalive pings on its streaming RPCs, as whole Connect envelopes (a flags byte, a
 * 4-byte length, the message) in the JSON and binary codecs: process.Process Start and Connect
 * (`{event: {keepalive: {}}}`, ProcessEvent field 4 inside field 1) and filesystem WatchDir
 * (`{keepalive: {}}`, field 3). A ping keeps a stream open, not a sandbox awake: the proxy does
 * not count one as activity (docs/data-plane.md, "Activity").
 */
const FRAMES = [
  envelope(Buffer.from('{"event":{"keepalive":{}}}')),
  envelope(Buffer.from('{"keepalive":{}}')),
  envelope(Buffer.from([0x0a, 0x02, 0x22, 0x00])),
  envelope(Buffer.from([0x1a, 0x00])),
];
const LONGEST = Math.max(...FRAMES.map((f) => f.length));

/** True when the chunk is exactly one of envd's keepalive envelopes. */
export function isKeepaliveFrame(chunk: Buffer): boolean {
  if (chunk.length > LONGEST || chunk.length < 5 || chunk[0] !== 0) return false;
  return FRAMES.some((f) => f.equals(chunk));
}

function envelope(message: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}
