/**
 * The egress bench's measurement: CPU time per request of the client and of each child process
 * over a run, direct and proxied runs alternated and merged, and their summary (rates, latency
 * percentiles, ratios, capacity per core).
 */
import { statSync } from 'node:fs';
import { stat, type Stat } from '../lib/stats.ts';
import { cpuMs } from '../proxy.ts';

interface Rate { rps: number; requests: number; seconds: number; errors: number; cpuUsPerRequest: Record<string, number | undefined> }

/** CPU time per request of the client (this process) and of each child, over `fn`. */
export async function withCpu(pids: Record<string, number | undefined>, fn: () => Promise<{ requests: number; seconds: number; errors: number }>): Promise<Rate> {
  const c0 = process.cpuUsage();
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuMs(pid)]));
  const r = await fn();
  const c1 = process.cpuUsage(c0);
  const cpuUsPerRequest: Record<string, number | undefined> = { client: (c1.user + c1.system) / r.requests };
  for (const [k, pid] of Object.entries(pids)) {
    const a = before[k];
    const b = cpuMs(pid);
    cpuUsPerRequest[k] = a === undefined || b === undefined ? undefined : ((b - a) * 1000) / r.requests;
  }
  return { rps: r.requests / r.seconds, ...r, cpuUsPerRequest };
}

/** Alternates direct and proxy in `rounds` rounds, so that drift on the machine touches both alike. */
export async function paired(rounds: number, direct: () => Promise<Rate>, proxy: () => Promise<Rate>) {
  const d: Rate[] = [];
  const p: Rate[] = [];
  for (let r = 0; r < rounds; r++) { d.push(await direct()); p.push(await proxy()); }
  return { direct: merge(d), proxy: merge(p) };
}

function merge(rs: Rate[]) {
  const requests = rs.reduce((a, r) => a + r.requests, 0);
  const seconds = rs.reduce((a, r) => a + r.seconds, 0);
  const keys = Object.keys(rs[0].cpuUsPerRequest);
  const cpu: Record<string, number | undefined> = {};
  for (const k of keys) {
    const vals = rs.map((r) => r.cpuUsPerRequest[k]);
    cpu[k] = vals.some((v) => v === undefined) ? undefined : round(rs.reduce((a, r) => a + (r.cpuUsPerRequest[k] as number) * r.requests, 0) / requests, 1);
  }
  return { rps: round(requests / seconds, 0), requests, seconds: round(seconds, 2), errors: rs.reduce((a, r) => a + r.errors, 0), rounds: rs.map((r) => round(r.rps, 0)), cpuUsPerRequest: cpu };
}

export const round = (v: number, d = 2) => Math.round(v * 10 ** d) / 10 ** d;

export function summarize(rate: Awaited<ReturnType<typeof paired>>, lat?: { direct: number[]; proxy: number[] }) {
  const d: Stat | undefined = lat ? stat(lat.direct) : undefined;
  const p: Stat | undefined = lat ? stat(lat.proxy) : undefined;
  return {
    direct: { ...rate.direct, ...(d ? { latencyMs: d } : {}) },
    proxy: { ...rate.proxy, ...(p ? { latencyMs: p } : {}) },
    throughputRatio: round(rate.proxy.rps / rate.direct.rps, 3),
    /**
     * Requests a second the busiest server process could serve with a core of its own, from its
     * CPU time per request (the upstream on the direct path, the proxy on the other): its own
     * limit, apart from the client and the shared cores.
     */
    capacityPerCoreRps: {
      direct: perCore(rate.direct.cpuUsPerRequest.upstream),
      proxy: perCore(rate.proxy.cpuUsPerRequest.proxy),
    },
    ...(d && p ? { addedP50Ms: round(p.p50 - d.p50), addedP99Ms: round(p.p99 - d.p99) } : {}),
  };
}

/** What summarize() gives for one phase: direct against proxied. */
export type Summary = ReturnType<typeof summarize>;

const perCore = (us: number | undefined) => (us ? round(1e6 / us, 0) : undefined);

export function fileSize(path: string): number | undefined {
  try { return statSync(path).size; } catch { return undefined; }
}

