/**
 * The process's Prometheus metrics (docs/observability.md, "Prometheus"), on prom-client. `svc up`
 * runs every component in one process and a cluster runs each in its own, so there is one
 * registry per process and every component's `/metrics` renders all of it. Components that run
 * twice in one process (the lifecycle replicas, or the tests' several masters) ask for their
 * metrics again: a name already registered answers the metric it names.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type Metric } from 'prom-client';

const registry = new Registry();
let processMetricsOn = false;

/** prom-client's process metrics (CPU, memory, event loop lag, GC, handles), once per process. */
function registryWithProcessMetrics(): Registry {
  if (!processMetricsOn) {
    processMetricsOn = true;
    collectDefaultMetrics({ register: registry });
  }
  return registry;
}

type Kind = 'counter' | 'gauge' | 'histogram';

/** The metric of that name, made on first ask; another kind or other labels under a taken name is a bug. */
function existing<M>(name: string, kind: Kind, labelNames: readonly string[], make: () => M): M {
  const reg = registryWithProcessMetrics();
  const found = reg.getSingleMetric(name) as (Metric & { labelNames?: string[] }) | undefined;
  if (!found) return make();
  const had = (found as { type?: string }).type;
  const labels = found.labelNames ?? [];
  if (had !== kind || labels.join(',') !== labelNames.join(',')) {
    throw new Error(`metric ${name} is registered as a ${had} with labels [${labels.join(', ')}], not a ${kind} with [${labelNames.join(', ')}]`);
  }
  return found as M;
}

export function counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return existing(name, 'counter', labelNames, () => new Counter<L>({ name, help, labelNames, registers: [registry] }));
}

export function gauge<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
  return existing(name, 'gauge', labelNames, () => new Gauge<L>({ name, help, labelNames, registers: [registry] }));
}

/** Buckets in seconds for operations that take milliseconds to a minute (creates, pauses, resumes). */
const OPERATION_SECONDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] as const;

export function histogram<L extends string = never>(name: string, help: string, labelNames: readonly L[] = [], buckets: readonly number[] = OPERATION_SECONDS): Histogram<L> {
  return existing(name, 'histogram', labelNames, () => new Histogram<L>({ name, help, labelNames, buckets: [...buckets], registers: [registry] }));
}

/** One value of a metric computed at scrape time. */
export interface Sample<L extends string = string> {
  labels: Partial<Record<L, string>>;
  value: number;
}

type Filled = Counter<string> | Gauge<string>;
interface Hook {
  fill: () => Sample[] | Promise<Sample[]>;
  onError: (err: Error) => void;
}
const hooks = new Map<Filled, Set<Hook>>();

/**
 * Computes a gauge (or a counter kept elsewhere) at scrape time: at each render the metric is
 * cleared and every hook's samples are added to it, so several instances in one process (two node
 * agents' warm pools) add up. A hook that fails is reported to `onError` and adds nothing; the
 * rest of the scrape is answered. Answers the function that removes the hook (the instance closed).
 */
export function collect<L extends string>(metric: Counter<L> | Gauge<L>, fill: () => Sample<L>[] | Promise<Sample<L>[]>, onError: (err: Error) => void): () => void {
  const m = metric as unknown as Filled;
  let set = hooks.get(m);
  if (!set) {
    const mine = new Set<Hook>();
    set = mine;
    hooks.set(m, mine);
    // prom-client runs `collect` before it reads the values; all hooks are awaited first and applied
    // together, so two scrapes at once cannot interleave a clear with another's additions.
    (m as { collect?: () => Promise<void> }).collect = async () => {
      const results = await Promise.all([...mine].map(async (h) => {
        try {
          return await h.fill();
        } catch (err) {
          h.onError(err as Error);
          return [];
        }
      }));
      m.reset();
      for (const samples of results) for (const s of samples) m.inc(s.labels, s.value);
    };
  }
  const hook: Hook = { fill: fill as Hook['fill'], onError };
  set.add(hook);
  return () => { set.delete(hook); };
}

/**
 * A histogram without labels for a hot path (the data-plane proxy's every request): `observe`
 * adds to preallocated counts and allocates nothing; the counts become the histogram's series
 * when it is scraped. One per name in the process, like the others.
 */
export interface HotHistogram {
  observe(value: number): void;
}

class FixedHistogram implements HotHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(readonly name: string, readonly help: string, private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
  }

  /** What prom-client's registry renders: cumulative buckets, then the sum and the count. */
  get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    let cumulative = 0;
    for (let i = 0; i <= this.bounds.length; i++) {
      cumulative += this.counts[i];
      values.push({ labels: { le: i < this.bounds.length ? this.bounds[i] : '+Inf' }, value: cumulative, metricName: `${this.name}_bucket` });
    }
    values.push({ labels: {}, value: this.sum, metricName: `${this.name}_sum` }, { labels: {}, value: this.count, metricName: `${this.name}_count` });
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

export function hotHistogram(name: string, help: string, buckets: readonly number[]): HotHistogram {
  const reg = registryWithProcessMetrics();
  const found = reg.getSingleMetric(name) as unknown;
  if (found instanceof FixedHistogram) return found;
  if (found) throw new Error(`metric ${name} is registered already, not as a hot histogram`);
  const h = new FixedHistogram(name, help, buckets);
  // The registry takes any metric that renders itself through get() (the shape its own metrics give).
  reg.registerMetric(h as unknown as Metric);
  return h;
}

/** The call a worker pool sends its workers for their metrics (worker-pool.ts). */
export const METRICS_CALL = { kind: 'svc-metrics' } as const;

type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;
const sources = new Set<() => Promise<MetricsJson[]>>();

/** Other processes' metrics (a worker pool's workers), summed into this process's /metrics. */
export function addMetricsSource(source: () => Promise<MetricsJson[]>): () => void {
  sources.add(source);
  return () => { sources.delete(source); };
}

/** This process's metrics as prom-client's JSON, for a primary to sum (a worker's answer). */
export function metricsAsJson(): Promise<MetricsJson> {
  return registryWithProcessMetrics().getMetricsAsJSON();
}

/** Everything registered in the process, and its workers' when it has any, in Prometheus's text format. */
export async function renderMetrics(): Promise<{ contentType: string; body: string }> {
  const reg = registryWithProcessMetrics();
  if (sources.size === 0) return { contentType: reg.contentType, body: await reg.metrics() };
  const remote = (await Promise.all([...sources].map((s) => s()))).flat();
  const merged = AggregatorRegistry.aggregate([await reg.getMetricsAsJSON(), ...remote]);
  return { contentType: reg.contentType, body: await merged.metrics() };
}

/**
 * The token a scrape presents on a port whose routes want it in `header` (the proxy's, the egress
 * proxy's and the template center's): that header, else `Authorization: Bearer <token>`, the only
 * header Debian 12's Prometheus (2.42) can set; newer ones send any (`http_headers`).
 */
export function scrapeToken(headers: IncomingHttpHeaders, header: string): string | undefined {
  const own = headers[header.toLowerCase()];
  if (typeof own === 'string' && own) return own;
  const auth = headers.authorization;
  return typeof auth === 'string' && /^bearer\s+\S/i.test(auth) ? auth.replace(/^bearer\s+/i, '').trim() : undefined;
}

/** Answers a `/metrics` route (contracts' METRICS_ROUTE) with the process's metrics. */
export async function sendMetrics(reply: FastifyReply): Promise<FastifyReply> {
  const { contentType, body } = await renderMetrics();
  return reply.type(contentType).send(body);
}
