import type { Kysely } from 'kysely';
import { badRequest, notFound, type Logger } from '@svc/common';
import type { SandboxMetrics } from '@svc/contracts/node-agent';
import {
  MAX_SANDBOX_IDS, SAMPLE_INTERVAL_MS, type LatestSandboxMetrics, type MaxTeamMetric, type SandboxMetricSample, type TeamMetric, type TeamMetricName,
} from '@svc/contracts/metrics-history';
import type { Database } from '../db/schema.ts';
import type { MetricsHistoryRepo, SandboxMetricDbRow } from './repo.ts';
import type { TeamMetricRow } from './tables.ts';

/** The most samples one read answers: a day of one sandbox at one every 5 s. */
const MAX_SAMPLES = 17_280;
/** Intervals one sampler run writes at most when it catches up (a minute). */
const MAX_CATCH_UP = 12;
/** A team's range when it names none: the last hour. */
const DEFAULT_TEAM_RANGE_SEC = 3_600;

export interface TeamCounts {
  /** Running sandboxes per team now. */
  running(): Promise<Record<string, number>>;
  /** Sandboxes created per team in (from, to] (milliseconds), from the lifecycle events. */
  startsBetween(from: number, to: number): Promise<Record<string, number>>;
}

/**
 * The metrics history (docs/observability.md, "Metrics history"): node agents' samples of their
 * running sandboxes, a team's concurrent sandboxes and start rate per interval, and E2B's reads
 * of both. Samples are taken by each node from the host side every SAMPLE_INTERVAL_MS; a paused
 * sandbox has none.
 */
export class MetricsHistory {
  private lastSampled: number | undefined;

  constructor(private readonly d: { repo: MetricsHistoryRepo; db: Kysely<Database>; counts: TeamCounts; logger: Logger }) {}

  /** Keeps a node's samples of sandboxes the master records on that node; others are dropped (a node speaks for its own). */
  async report(nodeId: string, samples: Array<Omit<SandboxMetricSample, 'memCache'> & { memCache?: number }>): Promise<void> {
    if (samples.length === 0) return;
    const ids = [...new Set(samples.map((s) => s.sandboxId))];
    const teamOf = new Map<string, string>();
    for (let i = 0; i < ids.length; i += 500) {
      const rows = await this.d.db.selectFrom('t_svc_sandbox').select(['sandbox_id', 'team_id'])
        .where('node_id', '=', nodeId).where('state', '!=', 'terminated').where('sandbox_id', 'in', ids.slice(i, i + 500)).execute();
      for (const r of rows) teamOf.set(r.sandbox_id, r.team_id);
    }
    const rows = samples.filter((s) => teamOf.has(s.sandboxId)).map((s) => ({
      sandbox_id: s.sandboxId, team_id: teamOf.get(s.sandboxId)!, at: s.timestampUnix * 1000, cpu_count: s.cpuCount, cpu_used_pct: s.cpuUsedPct,
      mem_used: s.memUsed, mem_total: s.memTotal, mem_cache: s.memCache ?? 0, disk_used: s.diskUsed, disk_total: s.diskTotal,
    }));
    await this.d.repo.insertSamples(rows);
  }

  /** A sandbox's samples within [start, end] (unix seconds; start defaults to its start, end to now). */
  async range(sandboxId: string, startedAt: number, range: { start?: number; end?: number }): Promise<SandboxMetrics[]> {
    const from = range.start === undefined ? Math.floor(startedAt / 1000) * 1000 : range.start * 1000;
    const to = range.end === undefined ? Date.now() : range.end * 1000;
    return (await this.d.repo.range(sandboxId, from, to, MAX_SAMPLES)).map(toSample);
  }

  /** E2B's `/sandboxes/metrics`: the newest sample of each sandbox of the team named (ids comma-joined or repeated). */
  async latest(teamId: string, asked: string[]): Promise<LatestSandboxMetrics> {
    const ids = [...new Set(asked.flatMap((a) => a.split(',')).map((s) => s.trim()).filter(Boolean))];
    if (ids.length === 0) throw badRequest('sandbox_ids must name at least one sandbox');
    if (ids.length > MAX_SANDBOX_IDS) throw badRequest(`sandbox_ids names ${ids.length} sandboxes; at most ${MAX_SANDBOX_IDS} are allowed`);
    const rows = await this.d.repo.latest(teamId, ids);
    return { sandboxes: Object.fromEntries(rows.map((r) => [r.sandbox_id, toSample(r)])) };
  }

  async team(teamId: string, range: { start?: number; end?: number }): Promise<TeamMetric[]> {
    const { from, to } = teamRange(range);
    return (await this.d.repo.teamRange(teamId, from, to, MAX_SAMPLES)).map((r) => ({
      timestampUnix: Math.floor(Number(r.at) / 1000), concurrentSandboxes: r.concurrent, sandboxStartRate: rate(r.starts, r.interval_ms),
    }));
  }

  async teamMax(teamId: string, metric: TeamMetricName, range: { start?: number; end?: number }): Promise<MaxTeamMetric> {
    const { from, to } = teamRange(range);
    const row = await this.d.repo.teamMax(teamId, metric === 'concurrent_sandboxes' ? 'concurrent' : 'starts', from, to);
    // No interval was recorded: nothing ran and nothing started in the range.
    if (!row) return { timestampUnix: Math.floor(to / 1000), value: 0 };
    return { timestampUnix: Math.floor(Number(row.at) / 1000), value: metric === 'concurrent_sandboxes' ? row.concurrent : rate(row.starts, row.interval_ms) };
  }

  /**
   * Writes each interval that ended, on the SAMPLE_INTERVAL_MS grid, since the last one this master
   * wrote (at most MAX_CATCH_UP of them; the first run writes the last one): each team's running
   * sandboxes now and the creates within the interval. A run that starts a little late (the
   * scheduler counts from the end of the previous run) then skips none. Two masters write the same
   * row, and the first stays.
   */
  async sampleTeams(now = Date.now()): Promise<void> {
    const last = Math.floor(now / SAMPLE_INTERVAL_MS) * SAMPLE_INTERVAL_MS;
    const first = this.lastSampled === undefined ? last : Math.max(this.lastSampled + SAMPLE_INTERVAL_MS, last - (MAX_CATCH_UP - 1) * SAMPLE_INTERVAL_MS);
    if (first > last) return;
    const running = await this.d.counts.running();
    const rows: TeamMetricRow[] = [];
    for (let at = first; at <= last; at += SAMPLE_INTERVAL_MS) {
      const starts = await this.d.counts.startsBetween(at - SAMPLE_INTERVAL_MS, at);
      for (const teamId of new Set([...Object.keys(running), ...Object.keys(starts)])) {
        rows.push({ team_id: teamId, at, concurrent: running[teamId] ?? 0, starts: starts[teamId] ?? 0, interval_ms: SAMPLE_INTERVAL_MS });
      }
    }
    await this.d.repo.insertTeamRows(rows);
    this.lastSampled = last;
  }

  prune(before: number): Promise<number> {
    return this.d.repo.prune(before);
  }
}

/** A team route's range: the team's own id is checked by the route; here only the times. */
function teamRange(range: { start?: number; end?: number }): { from: number; to: number } {
  // A start in the future with no end is an empty range, not a start after the end.
  const to = range.end === undefined ? Math.max(Date.now(), (range.start ?? 0) * 1000) : range.end * 1000;
  const from = range.start === undefined ? to - DEFAULT_TEAM_RANGE_SEC * 1000 : range.start * 1000;
  if (from > to) throw badRequest('start must not be after end');
  return { from, to };
}

function rate(starts: number, intervalMs: number): number {
  return Math.round((starts / (intervalMs / 1000)) * 1000) / 1000;
}

function toSample(r: SandboxMetricDbRow): SandboxMetrics {
  return {
    timestampUnix: Math.floor(Number(r.at) / 1000), cpuCount: r.cpu_count, cpuUsedPct: Number(r.cpu_used_pct),
    memUsed: Number(r.mem_used), memTotal: Number(r.mem_total), memCache: Number(r.mem_cache), diskUsed: Number(r.disk_used), diskTotal: Number(r.disk_total),
  };
}

/** 404 for a team that is not the caller's (a team key) or does not exist. */
export function assertTeamVisible(caller: string | undefined, teamId: string, exists: boolean): void {
  if ((caller !== undefined && caller !== teamId) || !exists) throw notFound(`team ${teamId} not found`);
}
