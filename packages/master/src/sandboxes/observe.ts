import { badRequest } from '@svc/common';
import type { MetricsRange } from '@svc/contracts/master';
import type { SandboxLogs, SandboxMetrics } from '@svc/contracts/node-agent';
import type { SandboxLogSelection } from '@svc/contracts/sandbox-logs';
import type { SandboxContext } from './context.ts';
import { liveRow } from './rows.ts';

/**
 * The sandbox's samples within the range of unix seconds asked for (docs/observability.md,
 * "Metrics history"): its node's 5 s samples as the master keeps them. A sandbox with none kept
 * in the range yet (just created) answers the sample its node takes now, when now lies in it.
 */
export async function sandboxMetrics(c: SandboxContext, id: string, range: MetricsRange = {}): Promise<SandboxMetrics[]> {
  const { start, end } = range;
  if (start !== undefined && end !== undefined && start > end) throw badRequest('start must not be after end');
  const row = await liveRow(c, id);
  if (row.state === 'terminated') return [];
  const kept = await c.d.metricsHistory?.range(id, Number(row.started_at), range) ?? [];
  if (kept.length || row.state !== 'running') return kept;
  const now = Date.now() / 1000;
  if ((end !== undefined && end < Math.floor(now)) || (start !== undefined && start > Math.ceil(now))) return [];
  const sample = await (await c.d.nodes.client(row.node_id)).metrics(id);
  const inRange = (start === undefined || sample.timestampUnix >= start) && (end === undefined || sample.timestampUnix <= end);
  return inRange ? [sample] : [];
}

/** The sandbox's own log, as its node keeps it (running or paused). */
export async function sandboxLogs(c: SandboxContext, id: string, q: SandboxLogSelection): Promise<SandboxLogs> {
  const row = await liveRow(c, id);
  return (await c.d.nodes.client(row.node_id)).sandboxLogs(id, q);
}
