import type { PageProps } from '../page-props.ts';
import { errorText } from '../api.ts';
import { bytes, relative, when } from '../components/format.ts';
import { ErrorNote, Loading } from '../components/notes.tsx';
import { usePoll } from '../components/poll.ts';
import { StatusBadge, templateName, type E2bTemplate, type SvcTemplate } from '../components/template-wire.tsx';
import { href } from '../router.ts';

interface Listed {
  templates: E2bTemplate[];
  /** svc's view by template id (runtime, source, size); absent when that call failed. */
  svc?: Map<string, SvcTemplate>;
  svcError?: string;
}

/**
 * The team's templates: E2B's list (what the SDK sees) joined with svc's (runtime, source and
 * image size, which E2B's shape lacks). Refreshed every 5 s so a build's status moves by itself.
 */
export function TemplatesPage({ id }: PageProps) {
  const list = usePoll<Listed>(async () => {
    const [templates, svc] = await Promise.all([
      id.api.get<E2bTemplate[]>('/templates'),
      // Only extra columns depend on it: its failure is shown, the list still is.
      id.api.get<{ templates: SvcTemplate[] }>('/svc/template').then(
        (r) => ({ map: new Map(r.templates.map((t) => [t.template_id, t])) }),
        (err: unknown) => ({ error: errorText(err) }),
      ),
    ]);
    templates.sort((a, b) => templateName(a).localeCompare(templateName(b)));
    return 'map' in svc ? { templates, svc: svc.map } : { templates, svcError: svc.error };
  }, 5000, [id.api]);

  return (
    <>
      <h1>Templates</h1>
      <ErrorNote error={list.error} />
      {list.data?.svcError ? <p class="error" role="alert">Runtime and size are not shown: {list.data.svcError}</p> : null}
      {list.loading && !list.data ? <Loading what="templates" /> : null}
      {list.data ? <TemplateTable rows={list.data.templates} svc={list.data.svc} /> : null}
    </>
  );
}

function TemplateTable({ rows, svc }: { rows: E2bTemplate[]; svc?: Map<string, SvcTemplate> }) {
  return (
    <div class="card table-wrap">
      <table>
        <caption>Templates</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col" class="hide-narrow">ID</th>
            <th scope="col">Status</th>
            <th scope="col" class="hide-narrow">Runtime</th>
            <th scope="col" class="hide-narrow">Source</th>
            <th scope="col" class="hide-narrow">Image size</th>
            <th scope="col">CPU</th>
            <th scope="col">Memory</th>
            <th scope="col" class="hide-narrow">Disk</th>
            <th scope="col" class="hide-narrow">Builds</th>
            <th scope="col" class="hide-narrow">Updated</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((t) => {
            const s = svc?.get(t.templateID);
            const size = s?.image_info?.sizeBytes;
            return (
              <tr key={t.templateID}>
                <td>
                  <a href={href('templates', t.templateID)}>{templateName(t)}</a>
                  {t.aliases.length > 1 ? <span class="muted"> ({t.aliases.slice(1).join(', ')})</span> : null}
                  {t.public ? <span class="muted"> · public</span> : null}
                </td>
                <td class="hide-narrow mono">{t.templateID}</td>
                <td>
                  <StatusBadge status={t.buildStatus} />
                  {s?.error ? <div class="error" title={s.error}>{s.error.slice(0, 80)}</div> : null}
                </td>
                <td class="hide-narrow">{s ? s.runtime ?? 'node default' : '–'}</td>
                <td class="hide-narrow">{s?.source_kind ?? '–'}</td>
                <td class="hide-narrow">{size ? bytes(size) : '–'}</td>
                <td>{t.cpuCount}</td>
                <td>{bytes(t.memoryMB * 1024 * 1024)}</td>
                <td class="hide-narrow">{bytes(t.diskSizeMB * 1024 * 1024)}</td>
                {/* The API counts no template-builder build (docs/api.md): 0 there means unknown. */}
                <td class="hide-narrow">{s?.source_kind === 'builder' && !t.buildCount ? '–' : t.buildCount}</td>
                <td class="hide-narrow" title={when(t.updatedAt)}>{relative(t.updatedAt)}</td>
              </tr>
            );
          })}
          {rows.length === 0 ? <tr><td colSpan={11} class="muted">No templates yet: build one with the SDK's Template builder or <code>svc tpl</code>.</td></tr> : null}
        </tbody>
      </table>
    </div>
  );
}
