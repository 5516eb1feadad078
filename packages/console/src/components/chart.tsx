import { timeOfDay } from './format.ts';

/**
 * A line chart over time in plain SVG (no chart library: docs/console.md keeps the bundle small).
 * Named as an image by its title and its newest value, so a screen reader hears what a sighted
 * reader sees first.
 */
export interface Point { t: number; v: number }

export interface ChartProps {
  title: string;
  points: Point[];
  /** The y axis' top; the data's maximum (at least 1) when absent. */
  max?: number;
  format: (v: number) => string;
  height?: number;
}

const W = 600;

export function LineChart({ title, points, max, format, height = 140 }: ChartProps) {
  const H = height;
  const pad = { l: 0, r: 0, t: 8, b: 22 };
  const sorted = [...points].sort((a, b) => a.t - b.t);
  const top = max ?? Math.max(1, ...sorted.map((p) => p.v));
  const t0 = sorted[0]?.t ?? 0;
  const t1 = sorted.at(-1)?.t ?? 1;
  const x = (t: number) => pad.l + (t1 === t0 ? (W - pad.l - pad.r) : ((t - t0) / (t1 - t0)) * (W - pad.l - pad.r));
  const y = (v: number) => pad.t + (1 - Math.min(v, top) / top) * (H - pad.t - pad.b);
  const line = sorted.map((p, i) => `${i ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
  const last = sorted.at(-1);
  const label = last ? `${title}: ${format(last.v)} now, ${sorted.length} samples` : `${title}: no samples yet`;
  // The SVG stretches to its box (preserveAspectRatio none), so its text would stretch too: the
  // axis labels are HTML laid over it.
  return (
    <figure class="chart">
      <figcaption>{title}{last ? <span class="muted"> · {format(last.v)}</span> : null}</figcaption>
      <div class="chart-plot">
        <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={label} preserveAspectRatio="none">
          <line class="axis" x1={pad.l} y1={H - pad.b} x2={W - pad.r} y2={H - pad.b} />
          <line class="grid" x1={pad.l} y1={pad.t} x2={W - pad.r} y2={pad.t} />
          {sorted.length > 1 ? <path class="line" d={line} /> : null}
          {sorted.length === 1 ? <circle class="dot" cx={x(sorted[0]!.t)} cy={y(sorted[0]!.v)} r="3" /> : null}
        </svg>
        <span class="tick y-top" aria-hidden="true">{format(top)}</span>
        <span class="tick y-zero" aria-hidden="true">{format(0)}</span>
        {sorted.length ? <span class="tick x-start" aria-hidden="true">{timeOfDay(t0)}</span> : null}
        {sorted.length > 1 ? <span class="tick x-end" aria-hidden="true">{timeOfDay(t1)}</span> : null}
      </div>
    </figure>
  );
}
