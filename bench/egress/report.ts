/**
 * The egress bench's goals and the table it prints: the rates, latencies and CPU per request of
 * each path, and whether the goals were met.
 */
import { round, type Summary } from './measure.ts';

export const GOALS = {
  /** HTTPS keep-alive requests/s through the proxy, as a share of direct. */
  httpsKeepAliveThroughputRatio: 0.5,
  /** HTTPS keep-alive latency added at p50 (ms). */
  httpsAddedP50Ms: 2,
  /** New HTTPS connections (one request each) per second through the proxy: 20x mitmproxy's ~50. */
  httpsNewConnectionsPerSec: 1000,
};

export function printReport(
  r: Record<string, unknown>,
  cal: { handWrittenRps: number; nodeHttpsAgentRps: number },
  ka: Summary | undefined,
  nc: Summary | undefined,
  hk: Summary | undefined,
  met: Record<string, boolean | undefined>,
) {
  const m = r.machine as { cpus: number; loadavgStart: number[]; loadavgEnd: number[] };
  const pf = (ok: boolean | undefined) => (ok === undefined ? '' : ok ? 'pass' : 'FAIL');
  // Per process: CPU per request, and in brackets the share of one core it used (the busiest one is the bound).
  const cpu = (x: { rps: number; cpuUsPerRequest: Record<string, number | undefined> }) =>
    Object.entries(x.cpuUsPerRequest).map(([k, v]) => `${k} ${v ?? '?'}${v === undefined ? '' : ` (${Math.round((v * x.rps) / 1e4)}%)`}`).join(', ');
  const rows: string[][] = [['measure', 'direct', 'via proxy', 'ratio / added', 'goal', '']];
  if (ka?.direct.latencyMs && ka.proxy.latencyMs) {
    rows.push(['HTTPS keep-alive, requests/s', String(ka.direct.rps), String(ka.proxy.rps), `${round(ka.throughputRatio * 100, 1)}%`, `>= ${GOALS.httpsKeepAliveThroughputRatio * 100}%`, pf(met.httpsKeepAliveThroughputRatio)]);
    rows.push(['HTTPS keep-alive, latency p50 (ms)', String(ka.direct.latencyMs.p50), String(ka.proxy.latencyMs.p50), `+${ka.addedP50Ms}`, `<= +${GOALS.httpsAddedP50Ms}`, pf(met.httpsAddedP50Ms)]);
    rows.push(['HTTPS keep-alive, latency p99 (ms)', String(ka.direct.latencyMs.p99), String(ka.proxy.latencyMs.p99), `+${ka.addedP99Ms}`, '', '']);
  }
  if (nc?.direct.latencyMs && nc.proxy.latencyMs) {
    rows.push(['HTTPS new connection each, requests/s', String(nc.direct.rps), String(nc.proxy.rps), `${round(nc.throughputRatio * 100, 1)}%`, `>= ${GOALS.httpsNewConnectionsPerSec} via proxy`, pf(met.httpsNewConnectionsPerSec)]);
    rows.push(['HTTPS new connection, latency p50 (ms)', String(nc.direct.latencyMs.p50), String(nc.proxy.latencyMs.p50), `+${nc.addedP50Ms}`, '', '']);
    rows.push(['HTTPS new connection, latency p99 (ms)', String(nc.direct.latencyMs.p99), String(nc.proxy.latencyMs.p99), `+${nc.addedP99Ms}`, '', '']);
  }
  if (hk) rows.push(['HTTP keep-alive, requests/s', String(hk.direct.rps), String(hk.proxy.rps), `${round(hk.throughputRatio * 100, 1)}%`, '', '']);
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  console.log(`\negress proxy against direct, ${(r.params as { connections: number }).connections} connections for the rates; ${m.cpus} cores shared by client, proxy and upstream (three processes)`);
  for (const [i, row] of rows.entries()) {
    console.log(row.map((c, j) => c.padEnd(widths[j])).join('  '));
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
  console.log('\nCPU per request (us) by process, (share of one core it used):');
  for (const [name, x] of [['HTTPS keep-alive', ka], ['HTTPS new connections', nc], ['HTTP keep-alive', hk]] as const) {
    if (x) {
      console.log(`  ${name.padEnd(22)} direct: ${cpu(x.direct)}   via proxy: ${cpu(x.proxy)}`
        + `   -> one core of its own: upstream ${x.capacityPerCoreRps.direct ?? '?'} req/s, proxy ${x.capacityPerCoreRps.proxy ?? '?'} req/s`);
    }
  }
  console.log(`\nload generator: hand-written client ${cal.handWrittenRps} req/s, node https.Agent ${cal.nodeHttpsAgentRps} req/s (HTTPS keep-alive, direct); the hand-written one is used`);
  console.log(`goals met: ${(r.goals as { allMet: boolean }).allMet ? 'yes' : 'no'}   (load average: ${m.loadavgStart.join(' ')} at the start, ${m.loadavgEnd.join(' ')} at the end)`);
}

