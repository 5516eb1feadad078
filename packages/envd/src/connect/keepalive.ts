import type { IncomingHttpHeaders } from 'node:http';

const defaultIntervalSeconds = 90;

/** The keepalive interval a client asks for with `Keepalive-Ping-Interval` (seconds). */
export function keepaliveIntervalMs(headers: IncomingHttpHeaders): number {
  const raw = headers['keepalive-ping-interval'];
  const seconds = Number(Array.isArray(raw) ? raw[0] : raw);
  return (Number.isInteger(seconds) && seconds > 0 ? seconds : defaultIntervalSeconds) * 1000;
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
