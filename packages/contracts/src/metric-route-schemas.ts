/**
 * The shapes of E2B's metric routes beside the per-sandbox series (docs/observability.md,
 * "Metrics history"): the newest sample of several sandboxes, and a team's intervals.
 */
import { SandboxMetric } from './public-api-schemas.ts';

const int = { type: 'integer' } as const;
const timestamp = { type: 'string', format: 'date-time' } as const;

export const SandboxesWithMetrics = {
  type: 'object',
  required: ['sandboxes'],
  properties: { sandboxes: { type: 'object', additionalProperties: SandboxMetric } },
  additionalProperties: false,
} as const;

export const TeamMetric = {
  type: 'object',
  required: ['timestamp', 'timestampUnix', 'concurrentSandboxes', 'sandboxStartRate'],
  properties: { timestamp, timestampUnix: int, concurrentSandboxes: int, sandboxStartRate: { type: 'number' } },
  additionalProperties: false,
} as const;

export const MaxTeamMetric = {
  type: 'object',
  required: ['timestamp', 'timestampUnix', 'value'],
  properties: { timestamp, timestampUnix: int, value: { type: 'number' } },
  additionalProperties: false,
} as const;

export const METRIC_SCHEMAS = { SandboxesWithMetrics, TeamMetric, MaxTeamMetric } as const;
