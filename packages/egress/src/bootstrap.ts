import type { Logger, TaskStats } from '@svc/common';
import { EgressRuleError, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { checkPolicy } from './policy-check.ts';
import type { PolicyStore } from './policy-store.ts';
import type { PolicyChange } from './policy-sync.ts';

const BOOTSTRAP_FIRST_RETRY_MS = 250;
const BOOTSTRAP_MAX_RETRY_MS = 15_000;

/**
 * The first load of every policy from the master. Until it succeeds the proxy refuses all
 * traffic; it is retried with a doubling delay and counted for the health answer. With worker
 * processes, `announce` takes the result (and markReady) to every worker; the proxy counts as
 * ready once they all have it.
 */
export class Bootstrap {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly task: TaskStats = { runs: 0, failures: 0, failingSince: null, lastFailure: null, lastFailureAt: null };

  /** Whether every worker has the store's readiness; at once without workers. */
  private announced: boolean;

  constructor(
    private readonly store: PolicyStore,
    private readonly logger: Logger,
    private readonly source: (() => Promise<SandboxEgressPolicy[]>) | undefined,
    private readonly announce?: (change: PolicyChange) => Promise<void>,
  ) {
    this.announced = !announce;
  }

  /** The store is loaded, and every worker knows it. */
  ready(): boolean {
    return this.store.ready && this.announced;
  }

  start(): void {
    if (!this.source) {
      this.store.markReady();
      void this.announceChange({ kind: 'ready' });
      return;
    }
    void this.attempt(BOOTSTRAP_FIRST_RETRY_MS);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  stats(): Record<string, TaskStats> {
    return this.source ? { 'policy-bootstrap': { ...this.task } } : {};
  }

  private async attempt(nextDelayMs: number): Promise<void> {
    if (this.stopped || !this.source) return;
    this.task.runs++;
    this.store.beginBootstrap();
    try {
      const list = await this.source();
      if (this.stopped) return;
      const policies = this.checked(list);
      this.store.replaceAll(policies);
      this.task.failingSince = null;
      // The store as it is now (the list merged with the changes that raced it), taken before any await.
      await this.announceChange({ kind: 'replace', policies: this.store.list() });
      this.logger.info({ policies: policies.length, attempts: this.task.runs }, 'egress policies loaded; the proxy is ready');
    } catch (err) {
      const message = (err as Error)?.message ?? String(err);
      const now = new Date().toISOString();
      this.task.failures++;
      this.task.failingSince ??= now;
      this.task.lastFailure = message;
      this.task.lastFailureAt = now;
      this.logger.warn({ err: message, attempt: this.task.runs, retryInMs: nextDelayMs }, 'egress policies could not be loaded; every sandbox request is refused until they are');
      if (this.stopped) return;
      this.timer = setTimeout(() => void this.attempt(Math.min(nextDelayMs * 2, BOOTSTRAP_MAX_RETRY_MS)), nextDelayMs);
      this.timer.unref();
    }
  }

  private async announceChange(change: PolicyChange): Promise<void> {
    if (!this.announce) return;
    try {
      await this.announce(change);
    } catch (err) {
      // Only a worker that answered with an error gets here (a dead or silent one is replaced from the current state).
      this.logger.error({ err: (err as Error).message, change: change.kind }, 'a worker could not apply the loaded egress policies');
    }
    this.announced = true;
  }

  /** A policy that fails the checks is left out (its sandbox is refused) rather than failing them all. */
  private checked(list: unknown): SandboxEgressPolicy[] {
    if (!Array.isArray(list)) throw new Error('the policy source answered something other than a list');
    const out: SandboxEgressPolicy[] = [];
    for (const raw of list) {
      try {
        out.push(checkPolicy(raw));
      } catch (err) {
        if (!(err instanceof EgressRuleError)) throw err;
        const id = (raw as { sandboxId?: unknown })?.sandboxId;
        this.logger.error({ sandboxId: id, err: err.message }, 'egress policy from the master fails the checks; its sandbox is refused all egress');
      }
    }
    return out;
  }
}
