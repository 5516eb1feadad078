import type { Logger } from '@svc/common';
import type { BuilderTemplates } from './ports.ts';
import type { BuildRepo } from './repo.ts';
import { STEP_TIMEOUT_MS } from './run-step.ts';

/** A build silent this long is abandoned (failAbandoned). */
const SILENT_LIMIT_MS = STEP_TIMEOUT_MS + 10 * 60_000;
/** A build requested and never started fails after this long. */
export const WAITING_LIMIT_MS = 24 * 3600_000;
/** Finished builds keep their log, and failed ones their row, this long (but a template's latest keeps both). */
export const BUILD_RETENTION_MS = 30 * 24 * 3600_000;
/** Rows read per query: the sweeps go through the table in pages. */
const PAGE = 200;

interface SweepDeps {
  repo: BuildRepo;
  templates: Pick<BuilderTemplates, 'builderFailed'>;
  logger: Logger;
}

/**
 * Fails builds that nothing runs any more: a master that stopped mid-build left them. A build
 * under way on any master writes a log line at least once a step, so one silent for longer than
 * a step may run (with a margin) is abandoned; a requested build never started waits a day.
 * Their sandboxes end with their timeout. Only the builds already past the limit are read, a
 * page at a time.
 */
export async function failAbandoned(d: SweepDeps, now: number): Promise<string[]> {
  const failed: string[] = [];
  let after = '';
  for (;;) {
    const page = await d.repo.unfinished({ waitingBefore: now - WAITING_LIMIT_MS, silentBefore: now - SILENT_LIMIT_MS, after, limit: PAGE });
    for (const b of page) {
      if (b.status === 'building' && now - (await d.repo.lastLogAt(b.build_id)) < SILENT_LIMIT_MS) continue;
      const message = b.status === 'waiting' ? 'the build was requested but never started' : 'the build stopped (its master went away); build again';
      if (await d.repo.transition(b.build_id, b.status, { status: 'error', reason: JSON.stringify({ message }) })) {
        await d.templates.builderFailed(b.template_id, message);
        failed.push(b.build_id);
      }
    }
    if (page.length < PAGE) return failed;
    after = page[page.length - 1].build_id;
  }
}

/**
 * Retention: builds finished more than BUILD_RETENTION_MS ago lose their log, and failed ones
 * that left nothing behind their row too; each template's latest build keeps both, and so does a
 * build with a snapshot, a capture or a tag (its template, a cache hit or a template's deletion
 * needs it). Otherwise every build request and its log stayed for good.
 */
export async function pruneFinished(d: SweepDeps, now: number, pageSize = PAGE): Promise<{ logsOf: number; rows: number }> {
  const out = { logsOf: 0, rows: 0 };
  let after: { finishedAt: number; buildId: string } | undefined;
  for (;;) {
    const page = await d.repo.pastRetention(now - BUILD_RETENTION_MS, pageSize, after);
    const rows = page.filter((b) => b.removable).map((b) => b.buildId);
    await d.repo.prune(page.map((b) => b.buildId), rows);
    out.logsOf += page.length;
    out.rows += rows.length;
    // A kept row (a superseded ready build, one with a tag or capture) stays past retention, at
    // the head of the order: the next page starts after the last row read (keyset on finished_at,
    // build_id). Starting over instead re-read the same kept page each run once a page of them
    // had piled up, and the logs after it were never pruned.
    if (page.length < pageSize) break;
    const last = page[page.length - 1];
    after = { finishedAt: last.finishedAt, buildId: last.buildId };
  }
  if (out.logsOf) d.logger.info(out, 'pruned template builds past their retention (their logs; failed ones\' rows)');
  return out;
}
