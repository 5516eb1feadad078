/**
 * What the sandbox list shows, loaded in one go per refresh: the live sandboxes from
 * GET /v2/sandboxes (state and metadata filtered by the API, pages followed through X-Next-Token
 * only as far as the page on screen needs), the ended ones from the killed lifecycle events, the
 * template filter applied here (id or alias, a part of either), and the newest metrics sample of
 * the running sandboxes on screen only.
 */
import { errorText, type Api } from '../api.ts';
import { EVENTS_PER_CALL, METRICS_IDS_PER_CALL, type ListedSandbox, type SandboxEvent, type SandboxMetric, type SandboxState } from './sandbox-types.ts';

export type StateFilter = 'all' | 'running' | 'paused' | 'ended';

export interface ListFilters {
  state: StateFilter;
  /** A part of a template id or alias; empty: any. */
  template: string;
  /** key=value pairs every sandbox must carry. */
  metadata: Array<[string, string]>;
  perPage: number;
  /** From 0. */
  page: number;
}

/** One row of the table, live or ended. */
export interface ListRow {
  id: string;
  state: SandboxState;
  templateID: string;
  alias?: string;
  runtime?: string;
  startedAt?: string;
  /** The idle timeout's end (live), or when it was killed (ended). */
  endsAt?: string;
  metadata: Record<string, string>;
  metric?: Pick<SandboxMetric, 'cpuUsedPct' | 'memUsed' | 'memTotal'>;
}

export interface ListPage {
  rows: ListRow[];
  /** Index of the first row on the page, from 0. */
  from: number;
  /** How many rows pass the filters, when every one was read; undefined: more than `from + rows`. */
  total: number | undefined;
  hasNext: boolean;
  /** A failed metrics call: the list shows, the CPU and Memory cells say why they are empty. */
  metricsError?: string;
}

/** The API's page size at most (GET /v2/sandboxes `limit`). */
const LIVE_LIMIT_MAX = 1000;
/** Pages of live sandboxes one refresh reads at most (10,000 rows): a bound on a refresh's cost. */
const LIVE_CALLS_MAX = 10;

/**
 * "a=1&b=2" or "a=1, b=2" → pairs; a part without `key=` is refused with a message the form shows.
 */
export function parseMetadataFilter(text: string): { pairs: Array<[string, string]> } | { error: string } {
  const pairs: Array<[string, string]> = [];
  for (const part of text.split(/[&,]/).map((p) => p.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq <= 0) return { error: `Metadata filter: "${part}" is not key=value` };
    pairs.push([part.slice(0, eq).trim(), part.slice(eq + 1).trim()]);
  }
  return { pairs };
}

/**
 * The `metadata` query value E2B's SDK sends: URL-encoded pairs joined by `&`, each key and value
 * encoded once more (the master decodes twice: packages/master/src/sandboxes/listing.ts), so a
 * value may hold `&`, `=` or `%`.
 */
export function metadataQuery(pairs: Array<[string, string]>): string | undefined {
  if (!pairs.length) return undefined;
  const enc = (s: string) => encodeURIComponent(encodeURIComponent(s));
  return pairs.map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&');
}

function templateMatches(needle: string, templateID: string, alias: string | undefined): boolean {
  if (!needle) return true;
  const n = needle.toLowerCase();
  return templateID.toLowerCase().includes(n) || (alias?.toLowerCase().includes(n) ?? false);
}

function metadataMatches(pairs: Array<[string, string]>, m: Record<string, string> | undefined): boolean {
  return pairs.every(([k, v]) => m?.[k] === v);
}

/**
 * Template aliases seen in live rows, kept across refreshes: a killed event names the template by
 * id only, and an alias is what the reader knows it by (and filters on).
 */
const aliases = new Map<string, string>();

function liveRow(s: ListedSandbox): ListRow {
  return {
    id: s.sandboxID, state: s.state, templateID: s.templateID, alias: s.alias, runtime: s.runtime,
    startedAt: s.startedAt, endsAt: s.endAt, metadata: s.metadata,
  };
}

function endedRow(e: SandboxEvent): ListRow {
  return {
    id: e.sandboxId, state: 'ended', templateID: e.sandboxTemplateId, alias: aliases.get(e.sandboxTemplateId),
    startedAt: e.eventData?.execution?.started_at, endsAt: e.timestamp, metadata: e.eventData?.sandbox_metadata ?? {},
  };
}

/** The live rows that pass the filters, read until `needed` of them or the last page. */
async function loadLive(api: Api, f: ListFilters, needed: number): Promise<{ rows: ListRow[]; complete: boolean }> {
  const rows: ListRow[] = [];
  const limit = Math.min(LIVE_LIMIT_MAX, Math.max(100, needed));
  let token: string | undefined;
  for (let call = 0; call < LIVE_CALLS_MAX; call++) {
    const page = await api.getPage<ListedSandbox>('/v2/sandboxes', {
      limit, state: f.state === 'running' || f.state === 'paused' ? f.state : undefined, metadata: metadataQuery(f.metadata) || undefined, nextToken: token,
    });
    for (const s of page.items) {
      if (s.alias) aliases.set(s.templateID, s.alias);
      if (templateMatches(f.template, s.templateID, s.alias)) rows.push(liveRow(s));
    }
    token = page.nextToken;
    if (!token) return { rows, complete: true };
    if (rows.length >= needed) return { rows, complete: false };
  }
  return { rows, complete: false };
}

/** The newest killed events (one call: the API answers at most 100), one row per sandbox. */
async function loadEnded(api: Api, f: ListFilters, live: ListRow[]): Promise<ListRow[]> {
  const events = await api.get<SandboxEvent[]>('/events/sandboxes', { types: 'sandbox.lifecycle.killed', limit: EVENTS_PER_CALL });
  const seen = new Set(live.map((r) => r.id));
  const out: ListRow[] = [];
  for (const e of events) {
    if (seen.has(e.sandboxId)) continue;
    seen.add(e.sandboxId);
    const row = endedRow(e);
    if (templateMatches(f.template, row.templateID, row.alias) && metadataMatches(f.metadata, row.metadata)) out.push(row);
  }
  return out;
}

/** The newest sample of each running row, 100 ids a call, the calls side by side. */
async function loadMetrics(api: Api, rows: ListRow[]): Promise<Map<string, SandboxMetric>> {
  const ids = rows.filter((r) => r.state === 'running').map((r) => r.id);
  const batches: string[][] = [];
  for (let i = 0; i < ids.length; i += METRICS_IDS_PER_CALL) batches.push(ids.slice(i, i + METRICS_IDS_PER_CALL));
  const answers = await Promise.all(batches.map((b) => api.get<{ sandboxes: Record<string, SandboxMetric> }>('/sandboxes/metrics', { sandbox_ids: b.join(',') })));
  const out = new Map<string, SandboxMetric>();
  for (const a of answers) for (const [id, m] of Object.entries(a.sandboxes)) out.set(id, m);
  return out;
}

export async function loadSandboxList(api: Api, f: ListFilters): Promise<ListPage> {
  const from = f.page * f.perPage;
  // One row past the page tells whether there is a next one.
  const needed = from + f.perPage + 1;
  const live = f.state === 'ended' ? { rows: [], complete: true } : await loadLive(api, f, needed);
  const wantEnded = f.state === 'ended' || (f.state === 'all' && live.complete);
  const ended = wantEnded ? await loadEnded(api, f, live.rows) : [];
  const all = ended.length ? live.rows.concat(ended) : live.rows;
  const rows = all.slice(from, from + f.perPage);
  let metricsError: string | undefined;
  if (rows.some((r) => r.state === 'running')) {
    try {
      const metrics = await loadMetrics(api, rows);
      for (let i = 0; i < rows.length; i++) {
        const m = metrics.get(rows[i]!.id);
        if (m) rows[i] = { ...rows[i]!, metric: { cpuUsedPct: m.cpuUsedPct, memUsed: m.memUsed, memTotal: m.memTotal } };
      }
    } catch (err) {
      metricsError = `CPU and memory: ${errorText(err)}`;
    }
  }
  return { rows, from, total: live.complete ? all.length : undefined, hasNext: all.length > from + f.perPage || !live.complete, metricsError };
}
