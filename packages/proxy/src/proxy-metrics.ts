/**
 * The data plane's Prometheus metrics (docs/observability.md, "Prometheus"): every HTTP request
 * the proxy answers, by status, and how long it took to answer in full. The hot path only adds to
 * a typed array and a hot histogram (no allocation per request); the counts become the series
 * when the process is scraped. Process-wide: several proxies in one process add up.
 */
import { collect, counter, hotHistogram, type HotHistogram, type Logger } from '@svc/common';

/** nginx's "client closed request": the client left before the answer's head was sent. */
export const CLIENT_CLOSED = 499;

/** Seconds: a cache hit on loopback takes under a millisecond, an auto-resume a few hundred, a stream minutes. */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Answers by status code (100-599); index 0 holds any other. */
const byStatus = new Float64Array(600);
let duration: HotHistogram | undefined;

/** Registers the proxy's metrics with the process's registry, once (the first proxy started). */
export function registerProxyMetrics(logger: Logger): void {
  if (duration) return;
  duration = hotHistogram('svc_proxy_request_duration_seconds', 'Data-plane HTTP requests, from their arrival to their answer\'s end (WebSocket upgrades are not counted).', DURATION_BUCKETS);
  collect(
    counter('svc_proxy_requests_total', 'Data-plane HTTP requests by the status answered: the sandbox\'s own, or the proxy\'s (502, 404, 410, ...); 499 when the client left before the answer.', ['code']),
    () => {
      const samples = [];
      for (let code = 0; code < byStatus.length; code++) if (byStatus[code] > 0) samples.push({ labels: { code: code === 0 ? 'other' : String(code) }, value: byStatus[code] });
      return samples;
    },
    (err) => logger.warn({ err: err.message }, 'the proxy\'s request counts could not be read for a scrape'),
  );
}

/** One request answered with `status` (CLIENT_CLOSED when it was not), begun at `startedAt` (performance.now()). */
export function countAnswered(status: number, startedAt: number): void {
  byStatus[status >= 100 && status < 600 ? status : 0]++;
  duration?.observe((performance.now() - startedAt) / 1000);
}

/** Every request this process has answered so far (a worker's share, in its stats). */
export function answeredTotal(): number {
  let n = 0;
  for (let code = 0; code < byStatus.length; code++) n += byStatus[code];
  return n;
}
