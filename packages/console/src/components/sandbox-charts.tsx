import { ApiError, type Api } from '../api.ts';
import { LineChart, type Point } from './chart.tsx';
import { bytes, percent } from './format.ts';
import { ErrorNote, Section } from './notes.tsx';
import { usePoll } from './poll.ts';
import type { SandboxMetric } from './sandbox-types.ts';

/** The charts show this much of the past, refreshed this often (the node samples every 5 s). */
const WINDOW_S = 15 * 60;
const REFRESH_MS = 5000;

/** The samples of the last 15 minutes; none once the sandbox has ended (its metrics route is a 404 then). */
async function loadMetrics(api: Api, sandboxId: string): Promise<SandboxMetric[]> {
  const end = Math.floor(Date.now() / 1000);
  try {
    return await api.get<SandboxMetric[]>(`/sandboxes/${encodeURIComponent(sandboxId)}/metrics`, { start: end - WINDOW_S, end });
  } catch (err) {
    // An ended sandbox answers 404 (E2B's way, docs/compatibility.md): no samples, not a failure.
    if (err instanceof ApiError && err.status === 404) return [];
    throw err;
  }
}

export function SandboxCharts({ api, sandboxId, ended }: { api: Api; sandboxId: string; ended: boolean }) {
  const metrics = usePoll(() => (ended ? Promise.resolve([]) : loadMetrics(api, sandboxId)), ended ? undefined : REFRESH_MS, [api, sandboxId, ended]);
  const samples = metrics.data ?? [];
  const series = (v: (m: SandboxMetric) => number): Point[] => samples.map((m) => ({ t: m.timestampUnix * 1000, v: v(m) }));
  const newest = samples.reduce<SandboxMetric | undefined>((a, m) => (!a || m.timestampUnix > a.timestampUnix ? m : a), undefined);
  return (
    <Section title="Metrics">
      <ErrorNote error={metrics.error} />
      {ended ? <p class="muted">An ended sandbox keeps no metrics.</p> : (
        <div class="grid">
          <LineChart title="CPU" points={series((m) => m.cpuUsedPct)} max={100} format={percent} />
          <LineChart title="Memory" points={series((m) => m.memUsed)} max={newest?.memTotal} format={bytes} />
          <LineChart title="Disk" points={series((m) => m.diskUsed)} format={bytes} />
        </div>
      )}
    </Section>
  );
}
