/** Counts per component and readable defect lines (enough to replay one by hand). */
import type { Outcome } from './send.ts';
import type { Case, Component } from './spec.ts';
import { snippet, type Defect } from './verdict.ts';

interface Row {
  sent: number;
  statuses: Map<string, number>;
  defects: number;
  known: number;
  slowestMs: number;
}

export class Tally {
  private readonly rows = new Map<Component, Row>();

  record(c: Case, o: Outcome, defects: number, known: number): void {
    let row = this.rows.get(c.component);
    if (!row) this.rows.set(c.component, row = { sent: 0, statuses: new Map(), defects: 0, known: 0, slowestMs: 0 });
    row.sent++;
    const key = o.status !== undefined ? String(o.status) : o.error ?? 'none';
    row.statuses.set(key, (row.statuses.get(key) ?? 0) + 1);
    row.defects += defects;
    row.known += known;
    row.slowestMs = Math.max(row.slowestMs, o.ms);
  }

  get total(): number {
    let n = 0;
    for (const r of this.rows.values()) n += r.sent;
    return n;
  }

  lines(): string[] {
    return [...this.rows].map(([component, r]) => {
      const statuses = [...r.statuses].sort(([a], [b]) => a.localeCompare(b)).map(([s, n]) => `${s}×${n}`).join(' ');
      return `${component}: ${r.sent} requests; ${statuses}; defects ${r.defects} (+${r.known} known); slowest ${r.slowestMs} ms`;
    });
  }
}

export function describeDefect(c: Case, o: Outcome, d: Defect): string {
  const headers = Object.entries(c.headers).map(([k, v]) => `${k}: ${v.length > 80 ? `${v.slice(0, 40)}…(${v.length})` : v}`).join(', ');
  const path = c.path.length > 200 ? `${c.path.slice(0, 150)}…(${c.path.length} chars)` : c.path;
  const body = c.raw ?? c.body;
  return [
    `#${c.id} [${c.component}] ${d.kind}: ${d.detail}`,
    `    ${c.method} 127.0.0.1:${c.port}${path}  (${c.route}; ${c.note})`,
    `    headers: {${headers}}`,
    body === undefined ? '    no body' : `    body (${body.length} bytes): ${snippet(body)}`,
    `    answered in ${o.ms} ms`,
  ].join('\n');
}
