import { useState } from 'preact/hooks';
import { href } from '../router.ts';
import { bytes, relative, when } from './format.ts';
import { StatusBadge, type BuildStatus, type E2bBuild, type TemplateTag } from './template-wire.tsx';

export interface BuildRow {
  buildID: string;
  status: BuildStatus;
  createdAt?: string;
  finishedAt?: string;
  cpuCount?: number;
  memoryMB?: number;
  tags: string[];
}

/** A template's builds as GET /templates/{id} lists them (every build, the builder's too), each with the tags that name it. */
export function buildRows(listed: E2bBuild[], tags: TemplateTag[]): BuildRow[] {
  const tagsOf = new Map<string, string[]>();
  for (const t of tags) tagsOf.set(t.buildID, [...(tagsOf.get(t.buildID) ?? []), t.tag]);
  const rows: BuildRow[] = listed.map((b) => ({ ...b, tags: tagsOf.get(b.buildID) ?? [] }));
  const at = (r: BuildRow) => r.createdAt ?? r.finishedAt ?? '';
  return rows.sort((x, y) => at(y).localeCompare(at(x)));
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
          {rows.length === 0 ? <tr><td colSpan={7} class="muted">No builds yet.</td></tr> : null}
        </tbody>
      </table>
    </div>
  );
}

/** Opens a build by its id, as the SDK and `svc tpl build` print it. */
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
