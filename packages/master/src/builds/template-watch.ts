import type { Logger } from '@svc/common';

/** How often a running builder build asks whether its template still exists. */
const TEMPLATE_CHECK_MS = 5_000;

/**
 * Ends a builder build whose template was deleted: it held its build slot and its sandbox until
 * its last step, up to master.build_timeout_sec (left open at stop 57; the template center's
 * builds are cancelled by the delete itself, templates/build-jobs.ts). The template is asked
 * for, not told about, so the build notices on whichever master runs it; `onGone` then kills
 * the build sandbox, which ends the step that runs.
 */
export class TemplateWatch {
  private timer: NodeJS.Timeout | undefined;
  private deleted = false;

  constructor(
    private readonly exists: () => Promise<boolean>,
    private readonly onGone: () => void,
    private readonly logger: Logger,
    private readonly everyMs = TEMPLATE_CHECK_MS,
  ) {}

  get gone(): boolean { return this.deleted; }

  start(): this {
    this.timer = setInterval(() => { void this.check(); }, this.everyMs);
    this.timer.unref();
    return this;
  }

  /** Asks now (between steps); true when the template is gone. */
  async check(): Promise<boolean> {
    if (this.deleted) return true;
    const there = await this.exists().catch((err: Error) => {
      // Not knowing is no deletion: the build goes on and the next check asks again.
      this.logger.warn({ err: err.message }, 'a build could not ask whether its template still exists');
      return true;
    });
    if (there || this.deleted) return this.deleted;
    this.deleted = true;
    this.stop();
    this.onGone();
    return true;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
