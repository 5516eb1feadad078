import { useRef, useState } from 'preact/hooks';
import { ApiError, type Api } from '../api.ts';
import type { PageProps } from '../page-props.ts';
import { href } from '../router.ts';
import { ErrorNote, Loading, Section } from '../components/notes.tsx';
import { usePoll } from '../components/poll.ts';
import { SandboxActions } from '../components/sandbox-actions.tsx';
import { SandboxCharts } from '../components/sandbox-charts.tsx';
import { SandboxEvents } from '../components/sandbox-events.tsx';
import { endedFacts, MetadataSection, NetworkSection, SandboxFacts, VolumesSection } from '../components/sandbox-facts.tsx';
import { SandboxLogs } from '../components/sandbox-logs.tsx';
import { SandboxTerminal } from '../components/sandbox-terminal.tsx';
import { EVENTS_PER_CALL, type SandboxDetail, type SandboxEvent, type SandboxState } from '../components/sandbox-types.ts';

/** The facts and the events are read again this often. */
const REFRESH_MS = 5000;

interface Loaded {
  detail?: SandboxDetail;
  /** Its lifecycle events, newest first; undefined when the events API knows no such sandbox. */
  events?: SandboxEvent[];
  /** Why GET /sandboxes/{id} answered 404 ("sandbox … was killed"). */
  gone?: string;
  ended: boolean;
}

const is404 = (err: unknown) => err instanceof ApiError && err.status === 404;

/**
 * The events first: once they hold the kill, the sandbox is not asked for (it would be a 404, which
 * the browser reports as an error on every refresh); else the sandbox itself, whose 404 also means
 * ended (E2B answers a killed sandbox so).
 */
async function loadSandbox(api: Api, sandboxId: string, killedHere: boolean): Promise<Loaded> {
  const path = encodeURIComponent(sandboxId);
  let events: SandboxEvent[] | undefined;
  try {
    events = await api.get<SandboxEvent[]>(`/events/sandboxes/${path}`, { limit: EVENTS_PER_CALL });
  } catch (err) {
    // No events of such a sandbox: the sandbox's own answer below says whether it exists.
    if (!is404(err)) throw err;
  }
  // Killed from this page: ended, even if its killed event is not listed yet.
  if (killedHere || events?.some((e) => e.type === 'sandbox.lifecycle.killed')) return { events, ended: true };
  try {
    return { detail: await api.get<SandboxDetail>(`/sandboxes/${path}`), events, ended: false };
  } catch (err) {
    if (!is404(err)) throw err;
    return { events, gone: (err as ApiError).message, ended: true };
  }
}

export function SandboxPage({ id, sandboxId }: PageProps & { sandboxId: string }) {
  const api = id.api;
  // While a Kill runs and once it answered, nothing asks for what it takes away: the browser
  // reports each 404 of a sandbox killed between two refreshes as an error.
  const [killing, setKilling] = useState<string>();
  const [killed, setKilled] = useState<string>();
  const killingHere = killing === sandboxId;
  const killedHere = killed === sandboxId;
  const killingRef = useRef<string | undefined>(undefined);
  killingRef.current = killing;
  const killedRef = useRef<string | undefined>(undefined);
  killedRef.current = killed;
  const last = useRef<Loaded | undefined>(undefined);
  const loaded = usePoll(async () => {
    if (killingRef.current === sandboxId && last.current) return last.current;
    last.current = await loadSandbox(api, sandboxId, killedRef.current === sandboxId);
    return last.current;
  }, REFRESH_MS, [api, sandboxId]);
  const data = loaded.data;
  const detail = killedHere ? undefined : data?.detail;
  const ended = killedHere || data?.ended === true;
  const quiet = ended || killingHere;
  const state: SandboxState | undefined = ended ? 'ended' : detail?.state;
  const unknown = data && ended && !data.events && data.gone;

  const header = (
    <>
      <p class="muted sandbox-crumb"><a href={href('sandboxes')}>Sandboxes</a> /</p>
      <h1>{sandboxId}</h1>
    </>
  );
  if (!data && !killedHere) return <>{header}{loaded.error ? <ErrorNote error={loaded.error} /> : <Loading what="the sandbox" />}</>;
  if (unknown) return <>{header}<ErrorNote error={`No such sandbox: ${data.gone}`} /></>;

  return (
    <>
      {header}
      <ErrorNote error={loaded.error} />
      <SandboxActions api={api} sandboxId={sandboxId} detail={detail} state={state}
        onKilling={(k) => { killingRef.current = k ? sandboxId : undefined; setKilling(killingRef.current); }}
        onChanged={(what) => {
          if (what === 'killed') {
            // The refs now, not at the next render: the reload below reads them.
            killedRef.current = sandboxId;
            killingRef.current = undefined;
            setKilled(sandboxId);
            setKilling(undefined);
          }
          loaded.reload();
        }} />
      <div class="grid sandbox-top">
        <Section title="Details">
          <SandboxFacts detail={detail} ended={ended ? endedFacts(data?.events ?? []) : undefined} />
        </Section>
        <MetadataSection metadata={detail?.metadata ?? (ended ? endedFacts(data?.events ?? []).metadata : undefined)} />
      </div>
      <SandboxCharts api={api} sandboxId={sandboxId} ended={quiet} />
      <SandboxEvents events={data?.events} />
      <SandboxLogs api={api} sandboxId={sandboxId} live={!quiet && state !== undefined} />
      <SandboxTerminal api={api} sandboxId={sandboxId} state={state} killing={killingHere} />
      <div class="grid">
        <NetworkSection detail={detail} />
        <VolumesSection detail={detail} />
      </div>
    </>
  );
}
