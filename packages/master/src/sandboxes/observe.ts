import { badRequest } from '@svc/common';
import type { MetricsRange } from '@svc/contracts/master';
import type { SandboxLogs } from '@svc/contracts/node-agent';
import type { SandboxLogSelection } from '@svc/contracts/sandbox-logs';
import type { SandboxContext } from './context.ts';
import { liveRow } from './rows.ts';

/** The sandbox's metrics now, when now lies in the range of unix seconds asked for. */
export async function sandboxMetrics(c: SandboxContext, id: string, range: MetricsRange = {}) {
  const { start, end } = range;
  if (start !== undefined && end !== undefined && start > end) throw badRequest('start must not be after end');
  const row = await liveRow(c, id);
  if (row.state !== 'running' && row.state !== 'paused') return [];
  const now = Date.now() / 1000;
  // A sample is taken now: a range that ends before now, or starts after it, holds none.
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
