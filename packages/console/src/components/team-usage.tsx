import { useState } from 'preact/hooks';
import type { Api } from '../api.ts';
import { LineChart } from './chart.tsx';
import { when } from './format.ts';
import { ErrorNote, Loading, Section } from './notes.tsx';
import { usePoll } from './poll.ts';
import { usageSeries, type TeamMetric } from './team-series.tsx';

/** A range, how many points its charts may have, and how often it is asked again. */
const RANGES = {
  hour: { label: 'Last hour', seconds: 3600, maxPoints: 720, everyMs: 10_000 },
  day: { label: 'Last day', seconds: 86_400, maxPoints: 500, everyMs: 60_000 },
  week: { label: 'Last week', seconds: 7 * 86_400, maxPoints: 500, everyMs: 300_000 },
} as const;
type RangeName = keyof typeof RANGES;

const WRITE_LAG_S = 10;

interface Max { timestampUnix: number; value: number }

const count = (v: number) => String(Math.round(v));
const rate = (v: number) => `${v < 1 ? v.toFixed(2) : v.toFixed(1)}/s`;

/** The team's usage: concurrent sandboxes and start rate over a range, and the range's peak. */
export function Usage({ api, teamId }: { api: Api; teamId: string }) {
  const [range, setRange] = useState<RangeName>('hour');
  const r = RANGES[range];
  const path = `/teams/${encodeURIComponent(teamId)}/metrics`;
  const usage = usePoll(async () => {
    const end = Math.floor(Date.now() / 1000);
    const start = end - r.seconds;
    const [metrics, peak] = await Promise.all([
      api.get<TeamMetric[]>(path, { start, end }),
      api.get<Max>(`${path}/max`, { metric: 'concurrent_sandboxes', start, end }),
    ]);
    // The master writes an interval once it has ended, every 5 s: the last 10 s may not be written
    // yet, and would read as a drop to zero.
    return { ...usageSeries(metrics, start, end - WRITE_LAG_S, r.maxPoints), peak };
  }, r.everyMs, [api, teamId, range]);

  return (
    <Section
      title="Usage"
      actions={(
        <div class="field inline">
          <label for="usage-range">Range</label>
          <select id="usage-range" value={range} onChange={(e) => setRange(e.currentTarget.value as RangeName)}>
            {Object.entries(RANGES).map(([k, v]) => <option key={k} value={k}>{v.label}</option>)}
          </select>
        </div>
      )}
    >
      <ErrorNote error={usage.error} />
      {usage.loading && !usage.data ? <Loading what="usage" /> : null}
      {usage.data ? (
        <>
          <dl class="facts">
            <dt>Peak concurrent sandboxes</dt>
            <dd>{usage.data.peak.value}{usage.data.peak.value ? <span class="muted"> at {when(usage.data.peak.timestampUnix * 1000)}</span> : null}</dd>
          </dl>
          <div class="grid usage-charts">
            <LineChart title="Concurrent sandboxes" points={usage.data.concurrent} format={count} />
            <LineChart title="Start rate" points={usage.data.rate} format={rate} />
          </div>
        </>
      ) : null}
    </Section>
  );
}
