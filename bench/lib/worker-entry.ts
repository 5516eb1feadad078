import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { WorkerEntry } from '@svc/common';

/** The bundle `npm run build` makes, which `svc up` forks for its proxies' workers. */
const BUNDLE = fileURLToPath(new URL('../../dist/svc.mjs', import.meta.url));

/**
 * What the proxies' worker processes run in a benchmark: the built bundle, as `svc` runs them
 * (it forks itself, the role in SVC_WORKER_ROLE), unless SVC_BENCH_SOURCES=1 or there is no
 * bundle; then the TypeScript sources under tsx, as the tests run them. The two differ: tsx's
 * transform names each closure it makes with a defineProperty call. Measured on this machine
 * with both side by side in one run, rounds alternating, the data-plane worker used 16.3 to 17.0
 * µs of user CPU a request from the bundle against 17.5 to 20.8 from the sources (its kernel
 * time the same), about a tenth of its CPU (docs/benchmarks.md, "Proxies against nginx").
 */
export function workerCode(): { ran: 'bundle' | 'sources'; bundleBuilt?: string } {
  if (process.env.SVC_BENCH_SOURCES === '1' || !existsSync(BUNDLE)) return { ran: 'sources' };
  return { ran: 'bundle', bundleBuilt: statSync(BUNDLE).mtime.toISOString() };
}

/** The worker entry for a benchmark's proxy: `sources` is the package's own source entry. */
export function benchWorkerEntry(sources: WorkerEntry): WorkerEntry {
  if (workerCode().ran === 'sources') return sources;
  // SVC_BENCH_WORKER_FLAGS: node flags for the workers (--perf-basic-prof, for `perf record`).
  const execArgv = process.env.SVC_BENCH_WORKER_FLAGS?.split(' ').filter(Boolean) ?? [];
  return { exec: BUNDLE, args: [], execArgv };
}
