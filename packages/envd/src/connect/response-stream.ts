import type { ServerResponse } from 'node:http';
import type { DescMessage, MessageInitShape } from '@bufbuild/protobuf';
import { giveUpOnBody } from './body.ts';
import type { Codec } from './codec.ts';
import { toConnectError } from './code.ts';
import { encodeEnvelope, FLAG_END_STREAM } from './envelope.ts';

/**
 * The response side of a Connect stream: enveloped messages, then one end-stream message that
 * carries the error, if any. The HTTP status is 200 even for errors, as the protocol requires.
 */
export class ResponseStream<O extends DescMessage> {
  private closed = false;
  /** Settles when the socket drains (or closes); set while it is full. */
  private drained: Promise<void> | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly codec: Codec,
    private readonly schema: O,
    private readonly contentType: string,
  ) {}

  get isClosed(): boolean {
    return this.closed || this.res.destroyed;
  }

  /**
   * Writes one message. Returns nothing when the socket took it, or a promise that resolves once
   * the socket can take more (or the stream is gone): producers that can wait should await it.
   * Every write made while the socket is full gets the same promise: one listener pair per
   * stream, not one per write (a client that never read once piled up millions of them).
   */
  send = (message: MessageInitShape<O>): Promise<void> | undefined => {
    if (this.isClosed) return undefined;
    this.writeHead();
    const ok = this.res.write(encodeEnvelope(0, this.codec.serialize(this.schema, message)));
    if (ok && !this.drained) return undefined;
    this.drained ??= new Promise((resolve) => {
      const done = () => {
        this.res.off('drain', done);
        this.res.off('close', done);
        this.drained = undefined;
        resolve();
      };
      this.res.on('drain', done);
      this.res.on('close', done);
    });
    return this.drained;
  };

  end(error?: unknown): void {
    if (this.isClosed) return;
    this.closed = true;
    if (error !== undefined) giveUpOnBody(this.res);
    this.writeHead();
    const endStream = error === undefined ? {} : { error: toConnectError(error).toJSON() };
    this.res.end(encodeEnvelope(FLAG_END_STREAM, Buffer.from(JSON.stringify(endStream))));
  }

  private writeHead(): void {
    if (this.res.headersSent) return;
    this.res.writeHead(200, { 'content-type': this.contentType });
  }
}
