import type { PageProps } from '../page-props.ts';
import { errorText } from '../api.ts';
import { bytes, when } from '../components/format.ts';
import { ErrorNote, Loading, Section } from '../components/notes.tsx';
import { usePoll } from '../components/poll.ts';
import { BuildView } from '../components/template-build-log.tsx';
import { buildRows, BuildsTable, OpenBuild, type BuildRow } from '../components/template-builds.tsx';
import { StatusBadge, templateName, type E2bTemplateDetail, type SvcTemplate, type TemplateTag } from '../components/template-wire.tsx';
import { href } from '../router.ts';

/** `#/templates/<id>`: the template; `#/templates/<id>/builds/<buildId>`: one of its builds. */
export function TemplatePage({ id, templateId, buildId }: PageProps & { templateId: string; buildId?: string }) {
  if (buildId) return <BuildView api={id.api} templateId={templateId} buildId={buildId} />;
  return <TemplateDetail api={id.api} templateId={templateId} />;
}

interface Loaded {
  detail: E2bTemplateDetail;
  builds: BuildRow[];
  tags: TemplateTag[];
  svc?: SvcTemplate;
  svcError?: string;
}

function TemplateDetail({ api, templateId }: { api: PageProps['id']['api']; templateId: string }) {
  const path = `/templates/${encodeURIComponent(templateId)}`;
  const t = usePoll<Loaded>(async () => {
    const [detail, tags, svc] = await Promise.all([
      api.get<E2bTemplateDetail>(path),
      api.get<TemplateTag[]>(`${path}/tags`),
      // svc's view adds facts E2B's lacks; without it the page still shows E2B's.
      api.get<SvcTemplate>(`/svc/template/${encodeURIComponent(templateId)}`).then((s) => ({ s }), (err: unknown) => ({ error: errorText(err) })),
    ]);
    const builds = buildRows(detail.builds, tags);
    return { detail, builds, tags, ...('s' in svc ? { svc: svc.s } : { svcError: svc.error }) };
  }, 5000, [api, templateId]);

  if (!t.data) return <>{t.error ? <><h1>{templateId}</h1><ErrorNote error={t.error} /></> : <Loading what="the template" />}</>;
  const { detail, svc, builds } = t.data;
  const latest = builds[0];
  return (
    <>
      <p><a href={href('templates')}>← Templates</a></p>
      <h1>{templateName(detail)}</h1>
      <ErrorNote error={t.error} />
      {t.data.svcError ? <p class="error" role="alert">Runtime, source and resources are not shown: {t.data.svcError}</p> : null}
      <section class="card" aria-label="Template">
        <dl class="facts">
          <dt>ID</dt><dd class="mono">{detail.templateID}</dd>
          <dt>Names</dt><dd>{detail.names.length ? detail.names.join(', ') : '–'}</dd>
          <dt>Status</dt>
          <dd>{svc ? <StatusBadge status={svc.status} /> : latest ? <StatusBadge status={latest.status} /> : '–'}</dd>
          {svc?.error ? <><dt>Error</dt><dd class="error">{svc.error}</dd></> : null}
          <dt>Public</dt><dd>{detail.public ? 'yes' : 'no'}</dd>
          {svc ? <SvcFacts svc={svc} /> : null}
          <dt>Created</dt><dd>{when(detail.createdAt)}</dd>
          <dt>Updated</dt><dd>{when(detail.updatedAt)}</dd>
        </dl>
      </section>
      <Section title="Builds">
        <OpenBuild templateId={detail.templateID} />
        <BuildsTable templateId={detail.templateID} rows={builds} />
      </Section>
    </>
  );
}

function SvcFacts({ svc }: { svc: SvcTemplate }) {
  const size = svc.image_info?.sizeBytes;
  return (
    <>
      <dt>Source</dt><dd>{svc.source_kind}{svc.source_image_ref ? <span class="mono"> {svc.source_image_ref}</span> : null}</dd>
      <dt>Runtime</dt><dd>{svc.runtime ?? 'the node\'s default'}</dd>
      <dt>CPU</dt><dd>{svc.cpu_count} vCPU</dd>
      <dt>Memory</dt><dd>{bytes(svc.memory_mb * 1024 * 1024)}</dd>
      <dt>Disk</dt><dd>{bytes(svc.disk_size_mb * 1024 * 1024)}</dd>
      {size ? <><dt>Image size</dt><dd>{bytes(size)} (compressed)</dd></> : null}
      {svc.start_cmd ? <><dt>Start command</dt><dd class="mono">{svc.start_cmd}</dd></> : null}
      {svc.ready_cmd ? <><dt>Ready command</dt><dd class="mono">{svc.ready_cmd}</dd></> : null}
    </>
  );
}
