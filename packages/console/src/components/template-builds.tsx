import { useState } from 'preact/hooks';
import type { Api } from '../api.ts';
import { href } from '../router.ts';
import { bytes, relative, when } from './format.ts';
import { buildStatus, StatusBadge, type BuildStatus, type E2bBuild, type TemplateTag } from './template-wire.tsx';

/** What the status route said of a finished build known only by a tag. */
export interface Settled { status: BuildStatus; startedAt?: string }

export interface BuildRow {
  buildID: string;
  status: BuildStatus;
  createdAt?: string;
  finishedAt?: string;
  cpuCount?: number;
  memoryMB?: number;
  tags: string[];
}

/**
 * A template's builds: those GET /templates/{id} lists, and those only its tags name (the
 * template builder's builds are not in that list; docs/api.md). A build known only by a tag asks
 * the status route for its status and first line; `settled` keeps the answers that can no longer change.
 */
export async function buildRows(api: Api, templateId: string, listed: E2bBuild[], tags: TemplateTag[], settled: Map<string, Settled>): Promise<BuildRow[]> {
  const tagsOf = new Map<string, string[]>();
  for (const t of tags) tagsOf.set(t.buildID, [...(tagsOf.get(t.buildID) ?? []), t.tag]);
  const rows: BuildRow[] = listed.map((b) => ({ ...b, tags: tagsOf.get(b.buildID) ?? [] }));
  const known = new Set(rows.map((r) => r.buildID));
  const extra = [...tagsOf.keys()].filter((b) => !known.has(b));
  // Its first log line says when it started.
  const answers = await Promise.all(extra.map(async (b) => settled.get(b) ?? await buildStatus(api, templateId, b, 0, 1).then((r) => ({ status: r.status, startedAt: r.logEntries[0]?.timestamp }))));
  extra.forEach((b, i) => {
    const a = answers[i]!;
    if (a.status === 'ready' || a.status === 'error') settled.set(b, a);
    const tagged = tags.filter((t) => t.buildID === b).map((t) => t.createdAt).sort()[0];
    rows.push({ buildID: b, status: a.status, tags: tagsOf.get(b) ?? [], ...(a.startedAt ? { createdAt: a.startedAt } : {}), ...(tagged ? { finishedAt: tagged } : {}) });
  });
  const at = (r: BuildRow) => r.createdAt ?? r.finishedAt ?? '';
  return rows.sort((a, b) => at(b).localeCompare(at(a)));
}

export function BuildsTable({ templateId, rows }: { templateId: string; rows: BuildRow[] }) {
  return (
    <div class="table-wrap">
      {/* Named by aria-label: the section's heading already shows the name. */}
      <table aria-label="Builds">
        <thead>
          <tr>
            <th scope="col">Build</th>
            <th scope="col">Status</th>
            <th scope="col">Tags</th>
            <th scope="col" class="hide-narrow">Started</th>
            <th scope="col" class="hide-narrow">Finished</th>
            <th scope="col" class="hide-narrow">CPU</th>
            <th scope="col" class="hide-narrow">Memory</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((b) => (
            <tr key={b.buildID}>
              <td><a class="mono" href={href('templates', templateId, 'builds', b.buildID)} aria-label={`Build ${b.buildID}`}>{b.buildID}</a></td>
              <td><StatusBadge status={b.status} /></td>
              <td>{b.tags.length ? b.tags.join(', ') : '–'}</td>
              <td class="hide-narrow" title={when(b.createdAt)}>{b.createdAt ? relative(b.createdAt) : '–'}</td>
              <td class="hide-narrow" title={when(b.finishedAt)}>{b.finishedAt ? relative(b.finishedAt) : '–'}</td>
              <td class="hide-narrow">{b.cpuCount ?? '–'}</td>
              <td class="hide-narrow">{b.memoryMB === undefined ? '–' : bytes(b.memoryMB * 1024 * 1024)}</td>
            </tr>
          ))}
          {rows.length === 0 ? <tr><td colSpan={7} class="muted">No builds listed. A template builder's build shows here once it is tagged (a successful one is tagged default); open any build by its id above.</td></tr> : null}
        </tbody>
      </table>
    </div>
  );
}

/**
 * Opens a build by its id (the SDK and `svc tpl build` print it): the API lists a template
 * builder's build only once a tag names it, so a running or failed one is reached this way.
 */
export function OpenBuild({ templateId }: { templateId: string }) {
  const [buildId, setBuildId] = useState('');
  const [error, setError] = useState<string>();
  const open = (e: Event) => {
    e.preventDefault();
    const b = buildId.trim();
    if (!b) { setError('Give the build id.'); return; }
    location.hash = href('templates', templateId, 'builds', b);
  };
  return (
    <form class="row open-build" aria-label="Open a build" onSubmit={open} noValidate>
      <div class="field">
        <label for="open-build-id">Build ID</label>
        <input id="open-build-id" class="mono" value={buildId} autoComplete="off" spellcheck={false} onInput={(e) => { setBuildId(e.currentTarget.value); setError(undefined); }} />
      </div>
      <button type="submit">Open build</button>
      {error ? <p class="error" role="alert">{error}</p> : null}
    </form>
  );
}
