/**
 * The history of sandbox and team metrics (docs/observability.md, "Metrics history"): node agents
 * report a sample of each running sandbox every SAMPLE_INTERVAL_MS, the master keeps them, and
 * the gateway answers E2B's metric routes from them.
 *
 *   POST /internal/v1/nodes/:id/sandbox-metrics        → 204 (body SandboxMetricsReport; a node's own sandboxes)
 *   GET  /v1/metrics/sandboxes?sandboxIds=a,b          → LatestSandboxMetrics (the caller team's, newest sample of each)
 *   GET  /v1/teams/:id/metrics?start&end               → TeamMetric[]
 *   GET  /v1/teams/:id/metrics/max?metric&start&end    → MaxTeamMetric
 * The per-sandbox series is MASTER_ROUTES.metrics (master.ts). Another team's sandbox is left out
 * of a list, and another team's id is a 404.
 */
import { JsonClient } from '@svc/common';
import type { SandboxMetrics } from './node-agent.ts';
import { answers, call, type RouteTable } from './route-table.ts';

/** How often a node agent samples each running sandbox. */
export const SAMPLE_INTERVAL_MS = 5_000;
/** Samples in one report: a node with more running sandboxes sends several. */
export const MAX_SAMPLES_PER_REPORT = 5_000;

export interface SandboxMetricSample extends SandboxMetrics {
  sandboxId: string;
}

export interface SandboxMetricsReport {
  samples: SandboxMetricSample[];
}

/** E2B's `SandboxesWithMetrics`: the newest sample of each sandbox asked for that has one. */
export interface LatestSandboxMetrics {
  sandboxes: Record<string, SandboxMetrics>;
}

/** E2B's `TeamMetric`, one per sampling interval. */
export interface TeamMetric {
  timestampUnix: number;
  concurrentSandboxes: number;
  /** Sandboxes started per second over the interval. */
  sandboxStartRate: number;
}

export const TEAM_METRIC_NAMES = ['concurrent_sandboxes', 'sandbox_start_rate'] as const;
export type TeamMetricName = (typeof TEAM_METRIC_NAMES)[number];

/** E2B's `MaxTeamMetric`. */
export interface MaxTeamMetric {
  timestampUnix: number;
  value: number;
}

const int = { type: 'integer', minimum: 0 } as const;
const SampleSchema = {
  type: 'object',
  required: ['sandboxId', 'timestampUnix', 'cpuCount', 'cpuUsedPct', 'memUsed', 'memTotal', 'diskUsed', 'diskTotal'],
  properties: {
    sandboxId: { type: 'string', minLength: 1, maxLength: 128 },
    timestampUnix: int, cpuCount: int, cpuUsedPct: { type: 'number', minimum: 0 },
    memUsed: int, memTotal: int, memCache: int, diskUsed: int, diskTotal: int,
  },
  additionalProperties: false,
} as const;

const ReportBody = {
  type: 'object',
  required: ['samples'],
  properties: { samples: { type: 'array', items: SampleSchema, maxItems: MAX_SAMPLES_PER_REPORT } },
  additionalProperties: false,
} as const;

/** Unix seconds, as a query string sends them. */
const unixSeconds = { type: 'integer', minimum: 0, maximum: 999_999_999_999 } as const;

const LatestQuery = {
  type: 'object',
  required: ['sandboxIds'],
  // Repeated or comma-joined, as E2B's `sandbox_ids` comes: the master splits the commas.
  properties: { sandboxIds: { type: 'array', items: { type: 'string', maxLength: 16_384 }, minItems: 1, maxItems: 100 } },
  additionalProperties: false,
} as const;

const TeamRangeQuery = {
  type: 'object',
  properties: { start: unixSeconds, end: unixSeconds },
  additionalProperties: false,
} as const;

const TeamMaxQuery = {
  type: 'object',
  required: ['metric'],
  properties: { metric: { type: 'string', enum: TEAM_METRIC_NAMES }, start: unixSeconds, end: unixSeconds },
  additionalProperties: false,
} as const;

/** The most sandbox ids one latest-metrics call takes (E2B names no bound; this keeps a read small). */
export const MAX_SANDBOX_IDS = 100;

export const METRICS_HISTORY_ROUTES = {
  report: { method: 'POST', path: '/internal/v1/nodes/:id/sandbox-metrics', body: ReportBody, answer: answers<void>() },
  latest: { method: 'GET', path: '/v1/metrics/sandboxes', query: LatestQuery, answer: answers<LatestSandboxMetrics>() },
  team: { method: 'GET', path: '/v1/teams/:id/metrics', query: TeamRangeQuery, answer: answers<TeamMetric[]>() },
  teamMax: { method: 'GET', path: '/v1/teams/:id/metrics/max', query: TeamMaxQuery, answer: answers<MaxTeamMetric>() },
} as const satisfies RouteTable;

const R = METRICS_HISTORY_ROUTES;

/** The metrics history's routes, for node agents (report) and the gateway (the rest, with the team header). */
export class MetricsHistoryClient {
  private readonly http: JsonClient;
  constructor(baseUrl: string, opts: { timeoutMs?: number; headers?: Record<string, string> } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 30_000, ...(opts.headers ? { headers: opts.headers } : {}) });
  }
  report(nodeId: string, samples: SandboxMetricSample[]) { return call(this.http, R.report, { id: nodeId }, { body: { samples } }); }
  latest(sandboxIds: string[]) { return call(this.http, R.latest, {}, { query: { sandboxIds } }); }
  team(teamId: string, range: { start?: number; end?: number } = {}) { return call(this.http, R.team, { id: teamId }, { query: range }); }
  teamMax(teamId: string, metric: TeamMetricName, range: { start?: number; end?: number } = {}) {
    return call(this.http, R.teamMax, { id: teamId }, { query: { metric, ...range } });
  }
}
