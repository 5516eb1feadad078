import { conflict, randomId, waitAtMost, withLock, withLockWaiting, type Coordination, type Logger, type SvcError } from '@svc/common';
import type { SandboxEventData, SandboxEventType } from '@svc/contracts/events';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent, type SandboxEventKind } from '@svc/contracts/lifecycle';
import type { SandboxState } from '@svc/contracts/master-internal';
import type { SandboxRow } from '../db/schema.ts';
import type { ProxyCachePurger, SandboxEventLog } from './ports.ts';
import type { SandboxRepo, SandboxPatch } from './repo.ts';
import { movesOf, type Trigger } from './state-table.ts';

const LOCK_TTL_MS = 120_000;
/** The longest a state change waits for the proxies to drop their cached route before it answers. */
const PURGE_WAIT_MS = 1_000;

export interface Step {
  trigger: Trigger;
  /** Where to, when the trigger has more than one target (a kill that failed goes back where it was). */
  to?: SandboxState;
  /** Narrows the table's from-states (a kill of a sandbox the caller read as running). */
  from?: SandboxState[];
  /** Why, carried by the event: api, timeout, auto, connect, drain, or a terminate reason. */
  reason?: string;
  /** The columns written with the state. */
  patch?: SandboxPatch;
}

/**
 * The only code that writes a sandbox's state (docs/design.md, "Sandbox states"). A move is
 * checked against the state table (state-table.ts) and written compare-and-set on the state the
 * table allows it from, so a sweep that holds no lock can never overwrite a move made under one;
 * a move the row is not in a state for writes nothing. A move the table gives an event announces
 * it; a move into pausing, resuming or killing purges the proxies' cached route without one (state-table.ts,
 * `purges`). The per-sandbox lock serialises the operations (a pause's three steps) that make moves.
 */
export class SandboxTransitions {
  private readonly holder = `master-${process.pid}-${randomId(6)}`;

  constructor(private readonly d: { repo: SandboxRepo; coordination: Coordination; proxies: ProxyCachePurger; logger: Logger; events?: SandboxEventLog }) {}

  /** none → running: records a sandbox its node runs, and announces it; buildId: the artifact it started from. */
  async create(row: SandboxRow, buildId?: string): Promise<void> {
    const [move] = movesOf('create');
    if (row.state !== move!.to) throw new Error(`a sandbox is created ${move!.to}, not ${row.state}`);
    await this.d.repo.insert(row);
    this.emit('sandbox.created', row.sandbox_id);
    await this.d.events?.record(row, lifecycleType('sandbox.created'), {}, buildId ? { buildId } : {});
  }

  /** Makes the move if the row is in a state the table makes it from; answers whether it did. */
  async move(id: string, step: Step): Promise<boolean> {
    const moves = movesOf(step.trigger, step.to);
    const targets = new Set(moves.map((m) => m.to));
    // A programming error, not a request's: the callers name their moves from the table.
    if (targets.size !== 1) throw new Error(`trigger ${step.trigger} ${targets.size === 0 ? `has no move into ${step.to}` : 'has more than one target: name it'}`);
    const to = moves[0]!.to;
    const possible = moves.filter((m) => m.from !== 'none' && (!step.from || step.from.includes(m.from)));
    if (possible.length === 0) throw new Error(`trigger ${step.trigger} never moves from ${step.from?.join(', ')}`);
    // The event must not hang on which state the row was in: the write does not say.
    const events = new Set(possible.map((m) => m.event));
    if (events.size > 1) throw new Error(`trigger ${step.trigger} into ${to} announces by the state it leaves: name it in from`);
    if (!(await this.d.repo.writeState(id, possible.map((m) => m.from as SandboxState), to, step.patch ?? {}))) return false;
    const [event] = events;
    if (event) {
      await this.announce(event, id, step.reason);
      await this.recordEvent(id, event, step.reason);
    } else if (possible.some((m) => m.purges)) await this.purge(id);
    return true;
  }

  /** Keeps the event for the events API and the webhooks (docs/observability.md), with the row as the move left it. */
  private async recordEvent(id: string, kind: SandboxEventKind, reason?: string): Promise<void> {
    if (!this.d.events) return;
    const row = await this.d.repo.get(id).catch((err: Error) => {
      this.d.logger.error({ sandboxId: id, kind, err: err.message }, 'lifecycle event not recorded: the sandbox could not be read');
      return undefined;
    });
    if (row) await this.d.events.record(row, lifecycleType(kind), reason ? { reason } : {});
  }

  /** move(), where a row in another state is a 409 that names both states. */
  async mustMove(id: string, step: Step): Promise<void> {
    if (await this.move(id, step)) return;
    const cur = await this.d.repo.get(id);
    const to = step.to ?? movesOf(step.trigger)[0]!.to;
    throw conflict(`sandbox ${id} is ${cur?.state ?? 'gone'}; it cannot become ${to} (${step.trigger})`);
  }

  /**
   * Runs fn holding the sandbox's lifecycle lock; busy() when another holder has it. With waitMs,
   * the lock is retried that long first: an operation writes its settled state just before it
   * unlocks, so a caller that waited for the state can otherwise find the lock still held.
   */
  async locked<V>(id: string, busy: () => SvcError, fn: () => Promise<V>, waitMs = 0): Promise<V> {
    // Renewed while fn runs (common's withLockWaiting): a pause storing gigabytes outlasted the TTL,
    // and the stuck-row reconcile then took the lock and settled the row under the pause's feet.
    return withLockWaiting(this.d.coordination, `sbx:${id}`, this.holder, { ttlMs: LOCK_TTL_MS, waitMs, busy }, fn);
  }

  /** Runs fn holding the sandbox's lifecycle lock if no one holds it now; a sweep skips a busy sandbox. */
  async whenFree(id: string, fn: () => Promise<void>): Promise<void> {
    await withLock(this.d.coordination, `sbx:${id}`, this.holder, LOCK_TTL_MS, fn);
  }

  /**
   * A sandbox changed state: announced on the bus, and purged from every announced proxy's cache
   * over its admin route before the caller answers, so the next request through any proxy sees
   * the change (docs/design.md, "Events and caches"). A proxy slower than PURGE_WAIT_MS is not
   * waited for: its purge still lands, a moment later.
   */
  private async announce(kind: SandboxEventKind, sandboxId: string, reason?: string): Promise<void> {
    this.emit(kind, sandboxId, reason);
    if (kind !== 'sandbox.created') await this.purge(sandboxId);
  }

  private async purge(sandboxId: string): Promise<void> {
    await waitAtMost(this.d.proxies.purge([sandboxId]), PURGE_WAIT_MS);
  }

  /** Announces a change that is no move of the state table (a new deadline, a snapshot) to the event log. */
  async recordChange(row: SandboxRow, type: SandboxEventType, data: SandboxEventData): Promise<void> {
    await this.d.events?.record(row, type, data);
  }

  private emit(kind: SandboxEventKind, sandboxId: string, reason?: string): void {
    const ev: SandboxEvent = { kind, sandboxId, at: new Date().toISOString(), ...(reason ? { reason } : {}) };
    this.d.coordination.publish(SANDBOX_EVENTS_TOPIC, ev).catch((err: Error) => this.d.logger.warn({ sandboxId, kind, err: err.message }, 'sandbox event not published'));
  }
}

/** The bus's event kind as E2B's lifecycle event type: sandbox.paused is sandbox.lifecycle.paused. */
function lifecycleType(kind: SandboxEventKind): SandboxEventType {
  return `sandbox.lifecycle.${kind.slice('sandbox.'.length)}` as SandboxEventType;
}
