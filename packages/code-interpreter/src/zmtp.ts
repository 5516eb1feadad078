/**
 * A ZMTP 3.0 client socket over TCP, enough to talk to a Jupyter kernel (rfc.zeromq.org/spec/23):
 * the NULL security mechanism, the greeting and READY handshake, multipart messages, and the
 * DEALER and SUB socket types (a SUB subscribes to everything). One socket is one connection.
 */
import { EventEmitter } from 'node:events';
import { connect, type Socket } from 'node:net';
import { ByteQueue } from './byte-queue.ts';

export type SocketType = 'DEALER' | 'SUB';

const GREETING_BYTES = 64;
const FLAG_MORE = 0x01;
const FLAG_LONG = 0x02;
const FLAG_COMMAND = 0x04;

/** Our greeting: signature, version 3.0, mechanism NULL, not a server, filler. */
export function greeting(): Buffer {
  const g = Buffer.alloc(GREETING_BYTES);
  g[0] = 0xff;
  g[9] = 0x7f;
  g[10] = 3;
  g[11] = 0;
  g.write('NULL', 12, 'ascii');
  return g;
}

/** One frame: flags, a one-byte or eight-byte size, the body. */
export function encodeFrame(body: Buffer, opts: { more?: boolean; command?: boolean } = {}): Buffer {
  let flags = (opts.more ? FLAG_MORE : 0) | (opts.command ? FLAG_COMMAND : 0);
  if (body.length <= 255) return Buffer.concat([Buffer.from([flags, body.length]), body]);
  flags |= FLAG_LONG;
  const head = Buffer.alloc(9);
  head[0] = flags;
  head.writeBigUInt64BE(BigInt(body.length), 1);
  return Buffer.concat([head, body]);
}

/** A multipart message: every frame but the last carries MORE. */
export function encodeMessage(parts: Buffer[]): Buffer {
  return Buffer.concat(parts.map((p, i) => encodeFrame(p, { more: i < parts.length - 1 })));
}

/** A command frame: the name's length and name, then the body. */
function encodeCommand(name: string, body: Buffer = Buffer.alloc(0)): Buffer {
  return encodeFrame(Buffer.concat([Buffer.from([name.length]), Buffer.from(name, 'ascii'), body]), { command: true });
}

/** The READY command with its metadata properties (name length, name, 4-byte value length, value). */
export function encodeReady(properties: Record<string, string>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(properties)) {
    const v = Buffer.from(value);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(v.length);
    parts.push(Buffer.from([name.length]), Buffer.from(name, 'ascii'), len, v);
  }
  return encodeCommand('READY', Buffer.concat(parts));
}

export interface Frame {
  more: boolean;
  command: boolean;
  body: Buffer;
}

export type DecodeError = { code: 'bad_greeting' | 'message_too_large'; message: string };

/**
 * The largest message a kernel may send (all its frames together): a display of a huge value is
 * cut here instead of the service holding it, and the connection is then treated as broken
 * (the kernel's execution ends with this error). 256 MiB is far beyond any output a client
 * would read as one result.
 */
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/**
 * Reads the peer's side of a connection from the bytes as they arrive: its greeting first, then
 * frames. `push` returns the frames completed so far, or an error once the stream is invalid
 * (then the connection is unusable: nothing more is read from it).
 */
export class FrameDecoder {
  private readonly queue = new ByteQueue();
  private greeted = false;
  /** The size of the frames of the message being received, before the current one. */
  private messageBytes = 0;

  constructor(private readonly maxMessageBytes = MAX_MESSAGE_BYTES) {}

  push(chunk: Buffer): Frame[] | DecodeError {
    const q = this.queue;
    q.push(chunk);
    if (!this.greeted) {
      // The signature's first and tenth bytes arrive before the rest; check them as soon as they do.
      if (q.length >= 1 && q.peek(1)[0] !== 0xff) return { code: 'bad_greeting', message: 'the peer does not speak ZMTP' };
      if (q.length < GREETING_BYTES) return [];
      const g = q.take(GREETING_BYTES);
      if (g[9] !== 0x7f || g[10] < 3) return { code: 'bad_greeting', message: `the peer speaks ZMTP ${g[10]}, not 3` };
      const mechanism = g.subarray(12, 32).toString('ascii').replace(/\0+$/, '');
      if (mechanism !== 'NULL') return { code: 'bad_greeting', message: `the peer wants the ${mechanism} mechanism, not NULL` };
      this.greeted = true;
    }
    const frames: Frame[] = [];
    while (q.length >= 2) {
      const flags = q.peek(1)[0];
      const long = (flags & FLAG_LONG) !== 0;
      const headBytes = long ? 9 : 2;
      if (q.length < headBytes) break;
      const head = q.peek(headBytes);
      const size = long ? Number(head.readBigUInt64BE(1)) : head[1];
      const command = (flags & FLAG_COMMAND) !== 0;
      // Checked at the frame's head, before its body is held: the limit bounds what is buffered.
      const total = (command ? 0 : this.messageBytes) + size;
      if (total > this.maxMessageBytes) {
        return { code: 'message_too_large', message: `the kernel sent a message of more than ${this.maxMessageBytes} bytes (${total} so far), the most the service takes` };
      }
      if (q.length < headBytes + size) break;
      q.take(headBytes);
      const more = (flags & FLAG_MORE) !== 0;
      frames.push({ more, command, body: q.take(size) });
      if (!command) this.messageBytes = more ? total : 0;
    }
    return frames;
  }
}

/** The name of a command frame's command (READY, ERROR, PING, ...). */
export function commandName(body: Buffer): string {
  return body.subarray(1, 1 + body[0]).toString('ascii');
}

/** The service broke the connection: the peer sent what it does not take (a message past the limit, an invalid stream). */
export class ZmtpRefused extends Error {}

/**
 * A connected ZMTP socket. Events: 'message' (Buffer[] parts), 'close' (Error | undefined, the
 * reason when it did not close on our request: an invalid stream, a message past the limit, a
 * socket error, or the peer closing).
 */
export class ZmtpSocket extends EventEmitter<{ message: [Buffer[]]; close: [Error | undefined] }> {
  private parts: Buffer[] = [];
  private closedByUs = false;
  private failure: Error | undefined;

  private constructor(private readonly socket: Socket) {
    super();
  }

  /**
   * Connects and completes the handshake; a SUB socket then subscribes to every message. A
   * message larger than `maxMessageBytes` breaks the connection (MAX_MESSAGE_BYTES).
   */
  static connect(host: string, port: number, type: SocketType, opts: { timeoutMs?: number; maxMessageBytes?: number } = {}): Promise<ZmtpSocket> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port });
      socket.setNoDelay(true);
      const zmtp = new ZmtpSocket(socket);
      const decoder = new FrameDecoder(opts.maxMessageBytes);
      let ready = false;
      const timer = setTimeout(() => fail(new Error(`ZMTP handshake with ${host}:${port} timed out`)), opts.timeoutMs ?? 5_000);
      const fail = (err: Error) => {
        clearTimeout(timer);
        zmtp.failure ??= err;
        socket.destroy();
        if (!ready) reject(err);
      };
      socket.once('connect', () => {
        socket.write(greeting());
        socket.write(encodeReady({ 'Socket-Type': type, ...(type === 'DEALER' ? { Identity: '' } : {}) }));
      });
      socket.on('data', (chunk) => {
        const frames = decoder.push(chunk);
        if (!Array.isArray(frames)) return fail(new ZmtpRefused(`ZMTP from ${host}:${port}: ${frames.message}`));
        for (const frame of frames) {
          if (frame.command) {
            const name = commandName(frame.body);
            if (name === 'READY' && !ready) {
              ready = true;
              clearTimeout(timer);
              // ZMTP 3.0 subscribes with a message whose first byte is 1; an empty topic matches all.
              if (type === 'SUB') socket.write(encodeMessage([Buffer.from([1])]));
              resolve(zmtp);
            } else if (name === 'ERROR') {
              return fail(new Error(`ZMTP peer ${host}:${port} refused: ${frame.body.subarray(1 + frame.body[0] + 1).toString()}`));
            }
            // Other commands (PING of ZMTP 3.1 heartbeats) need no answer from a 3.0 peer.
            continue;
          }
          if (!ready) return fail(new Error(`ZMTP peer ${host}:${port} sent a message before READY`));
          zmtp.parts.push(frame.body);
          if (!frame.more) {
            const message = zmtp.parts;
            zmtp.parts = [];
            zmtp.emit('message', message);
          }
        }
      });
      socket.on('error', (err) => {
        if (!ready) fail(err);
        else zmtp.failure ??= err;
      });
      socket.on('close', () => {
        clearTimeout(timer);
        if (!ready) return reject(new Error(`ZMTP connection to ${host}:${port} closed during the handshake`));
        zmtp.emit('close', zmtp.closedByUs ? undefined : (zmtp.failure ?? new Error(`ZMTP connection to ${host}:${port} closed`)));
      });
    });
  }

  send(parts: Buffer[]): void {
    this.socket.write(encodeMessage(parts));
  }

  /**
   * Stops reading: what the peer sends waits in the TCP buffers and then in the peer's own
   * queue, so a slow consumer holds the peer back instead of the service buffering for it.
   */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  close(): void {
    this.closedByUs = true;
    this.socket.destroy();
  }
}
