import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { Api } from '../api.ts';
import { ApiError, errorText } from '../api.ts';
import { href } from '../router.ts';
import { timeOfDay, when } from './format.ts';
import { ErrorNote, Section } from './notes.tsx';
import { buildStatus, LOG_PAGE, StatusBadge, templateName, type BuildStatus, type E2bTemplateDetail, type LogEntry } from './template-wire.tsx';

/** How often a running build is asked for its new lines, and how long a failed call waits before the next. */
const FOLLOW_MS = 1000;
const RETRY_MS = 3000;

interface Followed {
  entries: LogEntry[];
  status?: BuildStatus;
  reason?: { message: string; step?: string };
  error?: string;
}

/**
 * Follows a build: its status and log every second while it builds or waits, asking only for the
 * lines after those it has (logsOffset); stops once it is ready or failed. A hidden tab asks nothing.
 */
function useBuild(api: Api, templateId: string, buildId: string): Followed {
  const [state, setState] = useState<Followed>({ entries: [] });
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let offset = 0;
    let last: LogEntry | undefined;
    setState({ entries: [] });
    const next = (ms: number) => { if (!stopped) timer = setTimeout(tick, ms); };
    async function tick() {
      if (document.visibilityState !== 'visible') return next(FOLLOW_MS);
      let r;
      try {
        r = await buildStatus(api, templateId, buildId, offset);
      } catch (err) {
        if (stopped) return;
        setState((s) => ({ ...s, error: errorText(err) }));
        // A build that does not exist will not come to exist: stop asking.
        if (!(err instanceof ApiError && err.status === 404)) next(RETRY_MS);
        return;
      }
      if (stopped) return;
      offset += r.logEntries.length;
      // A template-center build (not the builder's) answers its one progress line whatever the
      // offset: the line seen last is not shown twice.
      const fresh = r.logEntries.length === 1 && last && same(last, r.logEntries[0]!) ? [] : r.logEntries;
      last = r.logEntries.at(-1) ?? last;
      setState((s) => ({ entries: fresh.length ? [...s.entries, ...fresh] : s.entries, status: r.status, reason: r.reason }));
      if (r.logEntries.length >= LOG_PAGE) next(0); // more lines are waiting: catch up at once
      else if (r.status === 'building' || r.status === 'waiting') next(FOLLOW_MS);
    }
    void tick();
    return () => { stopped = true; clearTimeout(timer); };
  }, [api, templateId, buildId]);
  return state;
}

const same = (a: LogEntry, b: LogEntry) => a.timestamp === b.timestamp && a.message === b.message && a.level === b.level;

/** The build view (`#/templates/<id>/builds/<buildId>`): status, reason, and the log followed live. */
export function BuildView({ api, templateId, buildId }: { api: Api; templateId: string; buildId: string }) {
  const build = useBuild(api, templateId, buildId);
  const [template, setTemplate] = useState<{ name?: string; error?: string }>({});
  useEffect(() => {
    api.get<E2bTemplateDetail>(`/templates/${encodeURIComponent(templateId)}`).then(
      (t) => setTemplate({ name: templateName(t) }),
      (err: unknown) => setTemplate({ error: `The template: ${errorText(err)}` }),
    );
  }, [api, templateId]);
  const first = build.entries[0]?.timestamp;
  const lastAt = build.entries.at(-1)?.timestamp;
  const done = build.status === 'ready' || build.status === 'error';
  return (
    <>
      <p><a href={href('templates', templateId)}>← {template.name ?? templateId}</a></p>
      <h1>Build {buildId}</h1>
      <ErrorNote error={build.error} />
      <ErrorNote error={template.error} />
      <section class="card" aria-label="Build">
        <dl class="facts">
          <dt>Status</dt>
          <dd>{build.status ? <StatusBadge status={build.status} /> : '…'}{build.status && !done ? <span class="muted"> (following)</span> : null}</dd>
          <dt>Template</dt>
          <dd><a href={href('templates', templateId)}>{template.name ?? templateId}</a></dd>
          <dt>Build ID</dt>
          <dd class="mono">{buildId}</dd>
          {build.reason ? <><dt>Reason</dt><dd class="error">{build.reason.message}{build.reason.step ? ` (step ${build.reason.step})` : ''}</dd></> : null}
          <dt>First log line</dt>
          <dd>{when(first)}</dd>
          <dt>{done ? 'Finished' : 'Last log line'}</dt>
          <dd>{when(lastAt)}{done && first && lastAt ? ` (${duration(first, lastAt)})` : ''}</dd>
        </dl>
      </section>
      <Section title="Build log">
        <BuildLog entries={build.entries} />
      </Section>
    </>
  );
}

function duration(from: string, to: string): string {
  const s = Math.round((new Date(to).getTime() - new Date(from).getTime()) / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** The log, kept scrolled to its end while the reader is there (scrolling up to read stops that). */
function BuildLog({ entries }: { entries: LogEntry[] }) {
  const ref = useRef<HTMLPreElement>(null);
  const stick = useRef(true);
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [entries.length]);
  return (
    <pre
      ref={ref}
      class="log build-log"
      role="log"
      aria-label="Build log"
      tabIndex={0}
      onScroll={(e) => { const el = e.currentTarget; stick.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 8; }}
    >
      {entries.length === 0 ? <span class="muted">No log lines yet.</span> : null}
      {entries.map((e, i) => (
        <span key={i} class={`line ${e.level}`}>{`${timeOfDay(e.timestamp)} ${e.level.toUpperCase().padEnd(5)} ${e.message}\n`}</span>
      ))}
    </pre>
  );
}
