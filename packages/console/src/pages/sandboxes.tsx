import { useEffect, useMemo, useState } from 'preact/hooks';
import type { PageProps } from '../page-props.ts';
import { ErrorNote, Loading } from '../components/notes.tsx';
import { usePoll } from '../components/poll.ts';
import { isStateFilter, PER_PAGE, SandboxFilters, type FilterValues } from '../components/sandbox-filters.tsx';
import { loadSandboxList, parseMetadataFilter } from '../components/sandbox-list-data.ts';
import { SandboxListTable, SandboxPager } from '../components/sandbox-list-table.tsx';

/** The list refreshes this often (the contract: by itself, every 2 s). */
const REFRESH_MS = 2000;
/** Typing in a text filter applies it after this pause, not on every key. */
const TYPING_MS = 300;

function initialFilters(q: URLSearchParams): FilterValues {
  const state = q.get('state');
  const perPage = Number(q.get('perPage'));
  return {
    state: isStateFilter(state) ? state : 'all',
    template: q.get('template') ?? '',
    metadata: q.get('metadata') ?? '',
    perPage: (PER_PAGE as readonly number[]).includes(perPage) ? perPage : PER_PAGE[0],
  };
}

function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setV(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return v;
}

/**
 * The filters are kept in the address (`#/sandboxes?state=paused`), replaced rather than pushed:
 * a reload or a shared link shows the same list, and typing does not fill the history.
 */
function keepInAddress(f: FilterValues, page: number): void {
  const q = new URLSearchParams();
  if (f.state !== 'all') q.set('state', f.state);
  if (f.template) q.set('template', f.template);
  if (f.metadata) q.set('metadata', f.metadata);
  if (f.perPage !== PER_PAGE[0]) q.set('perPage', String(f.perPage));
  if (page) q.set('page', String(page + 1));
  const s = q.toString();
  history.replaceState(history.state, '', `#/sandboxes${s ? `?${s}` : ''}`);
}

export function SandboxesPage({ id, route }: PageProps) {
  const [filters, setFilters] = useState(() => initialFilters(route.query));
  const [page, setPage] = useState(() => Math.max(0, (Number(route.query.get('page')) || 1) - 1));
  const template = useDebounced(filters.template.trim(), TYPING_MS);
  const metadataText = useDebounced(filters.metadata, TYPING_MS);
  const metadata = useMemo(() => parseMetadataFilter(metadataText), [metadataText]);
  const metadataError = 'error' in metadata ? metadata.error : undefined;
  // A filter the form refuses keeps the last good one on screen rather than listing everything.
  const [pairs, setPairs] = useState<Array<[string, string]>>(() => {
    const first = parseMetadataFilter(filters.metadata);
    return 'pairs' in first ? first.pairs : [];
  });
  useEffect(() => { if ('pairs' in metadata) setPairs(metadata.pairs); }, [metadata]);
  const pairsKey = JSON.stringify(pairs);

  useEffect(() => keepInAddress(filters, page), [filters, page]);

  const list = usePoll(
    () => loadSandboxList(id.api, { state: filters.state, template, metadata: pairs, perPage: filters.perPage, page }),
    REFRESH_MS,
    [id.api, filters.state, template, pairsKey, filters.perPage, page],
  );

  // Filters that leave fewer pages than the one shown: go to the last page there is.
  const data = list.data;
  useEffect(() => {
    if (data && !data.rows.length && page > 0 && data.total !== undefined) setPage(Math.max(0, Math.ceil(data.total / filters.perPage) - 1));
  }, [data, page, filters.perPage]);

  const change = (next: FilterValues) => {
    setFilters(next);
    setPage(0);
  };

  return (
    <>
      <h1>Sandboxes</h1>
      <SandboxFilters value={filters} onChange={change} metadataError={metadataError} />
      <ErrorNote error={list.error} />
      <ErrorNote error={data?.metricsError} />
      {data ? (
        <>
          <SandboxListTable page={data} now={Date.now()} />
          <SandboxPager page={data} onPage={(d) => setPage((p) => Math.max(0, p + d))} />
        </>
      ) : list.loading ? <Loading what="sandboxes" /> : null}
    </>
  );
}
