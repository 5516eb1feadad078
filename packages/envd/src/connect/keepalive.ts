import type { IncomingHttpHeaders } from 'node:http';

const defaultIntervalSeconds = 90;
/**
 * The range a client's interval is held to: past 2^31 - 1 ms Node's timers fire after 1 ms
 * (3,000,000 s once meant 872 pings a second), and a ping more often than each second is no use.
 */
const minIntervalSeconds = 1;
const maxIntervalSeconds = 3600;

/** The keepalive interval a client asks for with `Keepalive-Ping-Interval` (seconds), clamped to 1 s .. 1 h. */
export function keepaliveIntervalMs(headers: IncomingHttpHeaders): number {
  const raw = headers['keepalive-ping-interval'];
  const seconds = Number(Array.isArray(raw) ? raw[0] : raw);
  const asked = Number.isInteger(seconds) && seconds > 0 ? seconds : defaultIntervalSeconds;
  return Math.min(Math.max(asked, minIntervalSeconds), maxIntervalSeconds) * 1000;
}

/** Calls `ping` whenever the stream has been quiet for `intervalMs`. */
export class Keepalive {
  private readonly timer: NodeJS.Timeout;

  constructor(intervalMs: number, ping: () => void) {
    this.timer = setInterval(ping, intervalMs);
  }

  /** Something was just sent: the next ping is due one interval from now. */
  reset(): void {
    this.timer.refresh();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
