import type { SandboxEventKind } from '@svc/contracts/lifecycle';
import type { SandboxState } from '@svc/contracts/master-internal';

/**
 * What moves a sandbox from one state to another. The public API shows two states (a pausing
 * sandbox is `paused`, a resuming one `running`: docs/compatibility.md); these are the master's.
 */
export type Trigger =
  | 'create'
  | 'pause' | 'paused' | 'pause-failed'
  | 'resume' | 'resumed' | 'resume-failed'
  | 'kill' | 'killed' | 'kill-failed'
  | 'ended'
  | 'settled';

export interface Move {
  from: SandboxState | 'none';
  trigger: Trigger;
  /** When the move is made, in words (docs/design.md prints this table). */
  condition: string;
  to: SandboxState;
  /** The event the move announces; none for a step into a transient state or a rollback. */
  event?: SandboxEventKind;
  /**
   * The proxies drop the sandbox's cached route though no event is announced. Into pausing and
   * killing: the node is about to stop the sandbox and may release its address, so no request may
   * still go to it as running. Into resuming: the proxies cache a `paused` route for a while, and a
   * request during a resume must wait for it (ask the master) rather than get that cached answer.
   */
  purges?: true;
}

const LIVE_STATES: SandboxState[] = ['running', 'pausing', 'paused', 'resuming', 'killing'];

/**
 * The sandbox state table of docs/design.md, "Sandbox states", as data: the only moves the
 * master makes (transitions.ts writes a state only through it). A test keeps the two the same.
 */
export const STATE_TABLE: readonly Move[] = [
  { from: 'none', trigger: 'create', condition: 'the template exists and a node has room', to: 'running', event: 'sandbox.created' },
  { from: 'running', trigger: 'pause', condition: 'asked: the API, the idle timeout with on_timeout pause, a drain', to: 'pausing', purges: true },
  { from: 'pausing', trigger: 'paused', condition: 'its node paused it', to: 'paused', event: 'sandbox.paused' },
  { from: 'pausing', trigger: 'pause-failed', condition: 'its node did not pause it', to: 'running' },
  { from: 'paused', trigger: 'resume', condition: 'connect, resume, a request with auto_resume, a drain', to: 'resuming', purges: true },
  { from: 'resuming', trigger: 'resumed', condition: 'its node, or another from its stored package, runs it', to: 'running', event: 'sandbox.resumed' },
  { from: 'resuming', trigger: 'resume-failed', condition: 'no node runs it, or a move to another node was abandoned', to: 'paused' },
  { from: 'running', trigger: 'kill', condition: 'the API, the idle timeout with on_timeout kill, a team kill', to: 'killing', purges: true },
  { from: 'paused', trigger: 'kill', condition: 'the same; a paused sandbox is not resumed first', to: 'killing', purges: true },
  { from: 'killing', trigger: 'killed', condition: 'its node removed it, or no longer has it', to: 'terminated', event: 'sandbox.killed' },
  { from: 'killing', trigger: 'kill-failed', condition: 'its node did not remove it in time (it was running)', to: 'running' },
  { from: 'killing', trigger: 'kill-failed', condition: 'its node did not remove it in time (it was paused)', to: 'paused' },
  ...LIVE_STATES.map((from): Move => ({
    from, trigger: 'ended', condition: 'its node stopped it (failed, oom, pids_limit), was lost with it, or no longer runs it', to: 'terminated', event: 'sandbox.killed',
  })),
  { from: 'pausing', trigger: 'settled', condition: 'reconcile: its node reports it paused', to: 'paused', event: 'sandbox.paused' },
  { from: 'pausing', trigger: 'settled', condition: 'reconcile: its node reports it running', to: 'running' },
  { from: 'resuming', trigger: 'settled', condition: 'reconcile: its node reports it running', to: 'running', event: 'sandbox.resumed' },
  { from: 'resuming', trigger: 'settled', condition: 'reconcile: its node reports it paused', to: 'paused' },
];

/** The moves a trigger may make into `to` (every target when `to` is absent). */
export function movesOf(trigger: Trigger, to?: SandboxState): Move[] {
  return STATE_TABLE.filter((m) => m.trigger === trigger && (to === undefined || m.to === to));
}

/** Whether the table has a move from `from` on `trigger` (into `to`, when given). */
export function isLegal(from: SandboxState | 'none', trigger: Trigger, to?: SandboxState): boolean {
  return movesOf(trigger, to).some((m) => m.from === from);
}
