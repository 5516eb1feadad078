/**
 * A team's usage series for the charts: GET /teams/{teamID}/metrics answers only the 5 s
 * intervals in which the team ran or started sandboxes, so the gaps are zeros; a long range is
 * folded into at most `maxPoints` buckets (the largest concurrent count of a bucket, so a short
 * peak is not averaged away; the mean start rate, so the rate keeps its unit) to keep the SVG fast.
 */
import type { Point } from './chart.tsx';

export interface TeamMetric {
  timestampUnix: number;
  concurrentSandboxes: number;
  sandboxStartRate: number;
}

/** The metrics history's interval (docs/observability.md). */
const INTERVAL_S = 5;

export function usageSeries(metrics: TeamMetric[], startS: number, endS: number, maxPoints: number): { concurrent: Point[]; rate: Point[] } {
  const from = Math.floor(startS / INTERVAL_S) * INTERVAL_S;
  // The range's own length sets the bucket (an hour: 720 intervals of 5 s); its start rounded down adds at most one.
  const intervals = Math.max(1, Math.ceil((endS - startS) / INTERVAL_S));
  const bucketS = INTERVAL_S * Math.max(1, Math.ceil(intervals / Math.max(1, maxPoints)));
  const buckets = Math.ceil((endS - from) / bucketS) || 1;
  const max = new Array<number>(buckets).fill(0);
  const sum = new Array<number>(buckets).fill(0);
  for (const m of metrics) {
    const i = Math.floor((m.timestampUnix - from) / bucketS);
    if (i < 0 || i >= buckets) continue;
    max[i] = Math.max(max[i]!, m.concurrentSandboxes);
    sum[i]! += m.sandboxStartRate;
  }
  const concurrent: Point[] = [];
  const rate: Point[] = [];
  for (let i = 0; i < buckets; i++) {
    const t = from + i * bucketS;
    // The last bucket may be cut short by the range's end: its mean is over the intervals it has.
    const n = Math.max(1, Math.ceil((Math.min(bucketS, endS - t)) / INTERVAL_S));
    concurrent.push({ t: t * 1000, v: max[i]! });
    rate.push({ t: t * 1000, v: sum[i]! / n });
  }
  return { concurrent, rate };
}
