import type { Socket } from 'node:net';

/**
 * A socket's one idle timer serving two limits (a short one between requests or in a pool, a
 * longer one during an exchange) without a new timer per request: node makes a new timer for
 * every `socket.setTimeout`, even of the same length, so the timer is armed again only when its
 * length changes, and when the shorter limit fires during an exchange, `expired` counts the
 * quiet from the last byte moved and arms the timer for the rest of the longer one.
 */
export class IdleTimer {
  private armed = 0;
  /** Quiet time, and the bytes moved, when the timer last fired. */
  private quietMs = 0;
  private moved = -1;

  constructor(private readonly socket: Socket) {}

  /** Arms the socket's idle limit (0: none), when its length changes. */
  arm(ms: number): void {
    if (ms === this.armed) return;
    this.armed = ms;
    this.socket.setTimeout(ms);
  }

  /**
   * The armed limit fired: whether the socket has been quiet for `limitMs`. The quiet is the
   * armed length, unless no byte moved since the timer last fired, when it goes on from there;
   * short of the limit, the timer is armed for the rest.
   */
  expired(limitMs: number): boolean {
    const moved = this.socket.bytesRead + this.socket.bytesWritten;
    this.quietMs = moved === this.moved ? this.quietMs + this.armed : this.armed;
    this.moved = moved;
    if (this.quietMs >= limitMs) return true;
    this.armed = limitMs - this.quietMs;
    this.socket.setTimeout(this.armed);
    return false;
  }
}
