import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, errorText, type Api } from '../api.ts';
import { ErrorNote, Section } from './notes.tsx';
import { timeOfDay } from './format.ts';
import type { SandboxLogEntry } from './sandbox-types.ts';

/** How often the log is asked for new entries, and the most one call answers (SANDBOX_LOG_LIMITS.maxEntries). */
const FOLLOW_MS = 2000;
const PER_CALL = 1000;
/** Lines the view keeps; older ones are dropped so a chatty sandbox does not slow the page. */
const KEEP_LINES = 5000;

const key = (e: SandboxLogEntry) => `${e.timestamp}\u0000${e.level}\u0000${e.message}\u0000${JSON.stringify(e.fields)}`;

function line(e: SandboxLogEntry): string {
  const time = timeOfDay(e.timestamp);
  const { logger, ...rest } = e.fields;
  const fields = Object.entries(rest).map(([k, v]) => ` ${k}=${v}`).join('');
  return `${time} ${e.level.padEnd(5)} ${logger ? `[${logger}] ` : ''}${e.message}${fields}`;
}

/**
 * Follows GET /v2/sandboxes/{id}/logs: first the newest entries (backward), then every 2 s those
 * at or after the newest one shown (forward from its millisecond). The entries of that millisecond
 * come again; they are counted so that each shows once. New lines are appended to the <pre>, never
 * re-rendered, and the view stays at the bottom unless the reader scrolled up.
 */
class LogFollower {
  private cursor: number | undefined;
  /** The entries shown at the cursor's millisecond, by key: how many times each. */
  private atCursor = new Map<string, number>();
  private chunks: Array<{ node: Text; lines: number }> = [];
  private lines = 0;

  constructor(private readonly pre: HTMLPreElement) {}

  query(): Record<string, string | number> {
    return this.cursor === undefined ? { direction: 'backward', limit: PER_CALL } : { direction: 'forward', cursor: this.cursor, limit: PER_CALL };
  }

  /** Appends what is new of an answer (backward answers come newest first). Returns how many lines. */
  take(answer: SandboxLogEntry[]): number {
    const entries = this.cursor === undefined ? [...answer].reverse() : answer;
    const seen = new Map(this.atCursor);
    const fresh: SandboxLogEntry[] = [];
    for (const e of entries) {
      const k = key(e);
      const n = seen.get(k) ?? 0;
      if (n > 0 && Date.parse(e.timestamp) === this.cursor) { seen.set(k, n - 1); continue; }
      fresh.push(e);
    }
    if (this.cursor === undefined) this.cursor = 0;
    for (const e of fresh) {
      const t = Date.parse(e.timestamp);
      if (!Number.isFinite(t)) continue;
      if (t > this.cursor) { this.cursor = t; this.atCursor = new Map(); }
      if (t === this.cursor) this.atCursor.set(key(e), (this.atCursor.get(key(e)) ?? 0) + 1);
    }
    if (fresh.length) this.append(fresh.map(line));
    return fresh.length;
  }

  private append(text: string[]): void {
    const pre = this.pre;
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    const node = document.createTextNode(`${text.join('\n')}\n`);
    pre.appendChild(node);
    this.chunks.push({ node, lines: text.length });
    this.lines += text.length;
    while (this.lines > KEEP_LINES && this.chunks.length > 1) {
      const old = this.chunks.shift()!;
      old.node.remove();
      this.lines -= old.lines;
    }
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }
}

export function SandboxLogs({ api, sandboxId, live }: { api: Api; sandboxId: string; live: boolean }) {
  const pre = useRef<HTMLPreElement>(null);
  const follower = useRef<{ sandboxId: string; f: LogFollower } | undefined>(undefined);
  const [error, setError] = useState<string>();
  const [gone, setGone] = useState<string>();
  const [empty, setEmpty] = useState(true);
  useEffect(() => {
    const el = pre.current!;
    // Another sandbox's page: start over. The same one ending keeps its last lines on screen.
    if (follower.current?.sandboxId !== sandboxId) {
      el.textContent = '';
      follower.current = { sandboxId, f: new LogFollower(el) };
      setError(undefined);
      setGone(undefined);
      setEmpty(true);
    }
    // An ended sandbox has no log left to ask for (its route is a 404).
    if (!live) return undefined;
    const f = follower.current.f;
    let stopped = false;
    let busy = false;
    let timer: ReturnType<typeof setInterval> | undefined;
    const tick = async () => {
      if (busy || (document.visibilityState !== 'visible' && timer !== undefined)) return;
      busy = true;
      try {
        const r = await api.get<{ logs: SandboxLogEntry[] }>(`/v2/sandboxes/${encodeURIComponent(sandboxId)}/logs`, f.query());
        if (stopped) return;
        if (f.take(r.logs)) setEmpty(false);
        setError(undefined);
      } catch (err) {
        if (stopped) return;
        // Killed meanwhile: the log went with the sandbox (404); nothing more will come.
        if (err instanceof ApiError && err.status === 404) {
          setGone(err.message);
          clearInterval(timer);
        } else setError(`Logs: ${errorText(err)}`);
      } finally {
        busy = false;
      }
    };
    void tick();
    timer = setInterval(() => void tick(), FOLLOW_MS);
    return () => { stopped = true; clearInterval(timer); };
  }, [api, sandboxId, live]);
  const note = gone ? `The log ended: ${gone}.`
    : !live && empty ? 'An ended sandbox keeps no log.'
    : empty ? 'No log entries yet; new ones show here as they are written.'
    : !live ? 'The sandbox has ended: no more entries will come.' : undefined;
  return (
    <Section title="Logs">
      <ErrorNote error={error} />
      {note ? <p class="muted">{note}</p> : null}
      <pre ref={pre} class="log" role="log" aria-label="Sandbox log" tabIndex={0} />
    </Section>
  );
}
