import { Component } from 'preact';
import { href } from '../router.ts';
import { bytes, metadataText, percent, relative, shortWhen, when } from './format.ts';
import type { ListPage, ListRow } from './sandbox-list-data.ts';

/** A row as the text of its cells: what the row compares to skip a render when nothing changed. */
interface RowText {
  id: string;
  state: string;
  template: string;
  templateTitle: string;
  runtime: string;
  started: string;
  startedTitle: string;
  ends: string;
  endsTitle: string;
  metadata: string;
  cpu: string;
  memory: string;
}

function rowText(r: ListRow, now: number): RowText {
  const m = r.metric;
  return {
    id: r.id,
    state: r.state,
    template: r.alias ?? r.templateID,
    templateTitle: r.alias ? r.templateID : '',
    runtime: r.runtime ?? '–',
    // A time, not "12 s ago": a cell that changes at every refresh re-renders its row, and 1,000
    // rows re-rendered every 2 s made long frames (bench/console.ts). Its relative age in the title.
    started: shortWhen(r.startedAt, now),
    startedTitle: r.startedAt ? `${when(r.startedAt)} (${relative(r.startedAt, now)})` : '',
    // An ended row's Ends is when it ended: "2 min ago" (its State says ended).
    ends: r.endsAt ? relative(r.endsAt, now) : r.state === 'running' ? 'never' : r.state === 'ended' ? 'ended' : '–',
    endsTitle: r.endsAt ? when(r.endsAt) : '',
    metadata: metadataText(r.metadata),
    cpu: r.state === 'running' && m ? percent(m.cpuUsedPct) : '–',
    memory: r.state === 'running' && m ? `${bytes(m.memUsed)} / ${bytes(m.memTotal)}` : '–',
  };
}

/**
 * One row. A class for shouldComponentUpdate: with 1,000 rows refreshed every 2 s, a row whose
 * cells read the same is skipped instead of diffed.
 */
class Row extends Component<{ t: RowText }> {
  override shouldComponentUpdate(next: { t: RowText }): boolean {
    const a = this.props.t;
    const b = next.t;
    for (const k in a) if (a[k as keyof RowText] !== b[k as keyof RowText]) return true;
    return false;
  }

  override render() {
    const t = this.props.t;
    return (
      <tr>
        <td class="mono"><a href={href('sandboxes', t.id)}>{t.id}</a></td>
        <td><span class={`badge ${t.state}`}>{t.state}</span></td>
        <td title={t.templateTitle || undefined}>{t.template}</td>
        <td class="hide-narrow">{t.runtime}</td>
        <td class="hide-narrow" title={t.startedTitle || undefined}>{t.started}</td>
        <td title={t.endsTitle || undefined}>{t.ends}</td>
        <td class="hide-narrow sandbox-meta" title={t.metadata}>{t.metadata}</td>
        <td class="num">{t.cpu}</td>
        <td class="num">{t.memory}</td>
      </tr>
    );
  }
}

export function SandboxListTable({ page, now }: { page: ListPage; now: number }) {
  return (
    <div class="table-wrap">
      <table class="sandbox-list">
        <caption>Sandboxes</caption>
        <thead>
          <tr>
            <th scope="col" class="c-id">ID</th>
            <th scope="col" class="c-state">State</th>
            <th scope="col" class="c-template">Template</th>
            <th scope="col" class="c-runtime hide-narrow">Runtime</th>
            <th scope="col" class="c-started hide-narrow">Started</th>
            <th scope="col" class="c-ends">Ends</th>
            <th scope="col" class="c-meta hide-narrow">Metadata</th>
            <th scope="col" class="c-cpu num">CPU</th>
            <th scope="col" class="c-mem num">Memory</th>
          </tr>
        </thead>
        <tbody>
          {page.rows.map((r) => <Row key={r.id} t={rowText(r, now)} />)}
          {page.rows.length ? null : <tr><td colSpan={9} class="muted">No sandboxes match.</td></tr>}
        </tbody>
      </table>
    </div>
  );
}

/** "1–25 of 40", then Previous page / Next page. */
export function SandboxPager({ page, onPage }: { page: ListPage; onPage: (delta: number) => void }) {
  const first = page.rows.length ? page.from + 1 : page.from;
  const last = page.from + page.rows.length;
  const of = page.total === undefined ? `${last}+` : String(page.total);
  return (
    <nav class="row sandbox-pager" aria-label="Pages">
      <button type="button" disabled={page.from === 0} onClick={() => onPage(-1)}>Previous page</button>
      <span class="muted" aria-live="polite">{first}–{last} of {of}</span>
      <button type="button" disabled={!page.hasNext} onClick={() => onPage(1)}>Next page</button>
    </nav>
  );
}
