/**
 * The idle-timeout rules of docs/design.md, "Sandbox states", as pure functions over
 * (timeoutSec, endAt). timeoutSec: -1 never, 0 immediate, N idle seconds. endAt: epoch ms of
 * the projected timeout, null when the sandbox never times out.
 */
import { badRequest } from '@svc/common';
import { SANDBOX_LIMITS } from '@svc/contracts/master';

export interface Deadline {
  timeoutSec: number;
  endAt: number | null;
}

const NEVER = -1;

function windowFrom(now: number, timeoutSec: number): Deadline {
  return { timeoutSec, endAt: timeoutSec < 0 ? null : now + timeoutSec * 1000 };
}

function checkSeconds(v: unknown, what: string): asserts v is number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw badRequest(`${what} must be an integer number of seconds`);
  if (v > SANDBOX_LIMITS.timeoutSec) throw badRequest(`${what} must be at most ${SANDBOX_LIMITS.timeoutSec} seconds (got ${v})`);
}

/** Create: omitted = the server default (none when it is not positive); -1 never; 0 immediate; N seconds. */
export function atCreate(now: number, requested: number | undefined, serverDefaultSec: number): Deadline {
  if (requested === undefined) return windowFrom(now, serverDefaultSec > 0 ? serverDefaultSec : NEVER);
  checkSeconds(requested, 'timeout');
  if (requested < -1) throw badRequest('timeout must be -1 (never), 0 (immediate) or a positive number of seconds');
  return windowFrom(now, requested);
}

/**
 * connect(timeout): omitted keeps the current timeout; -1 never; N>0 ensures at least N seconds
 * remain (a longer existing deadline is kept); 0 or below -1 is a 400.
 * `resumed` says the sandbox was paused: then an omitted timeout starts a new window of the
 * current length, since the idle clock resets on resume.
 */
export function atConnect(now: number, cur: Deadline, requested: number | undefined, resumed: boolean): Deadline {
  if (requested === undefined || requested === null) return resumed ? restartWindow(now, cur) : cur;
  checkSeconds(requested, 'timeout');
  if (requested === 0 || requested < -1) throw badRequest('connect timeout must be -1 (never) or a positive number of seconds');
  if (requested === NEVER) return { timeoutSec: NEVER, endAt: null };
  const wanted = now + requested * 1000;
  if (cur.endAt === null) return resumed ? { timeoutSec: requested, endAt: wanted } : cur;
  if (cur.endAt >= wanted) return cur;
  return { timeoutSec: Math.max(requested, cur.timeoutSec), endAt: wanted };
}

/** Deprecated resume(timeout): omitted or 0 keeps the current timeout; -1 never; N>0 a new N-second window; below -1 is a 400. */
export function atResume(now: number, cur: Deadline, requested: number | undefined): Deadline {
  if (requested === undefined || requested === null || requested === 0) return restartWindow(now, cur);
  checkSeconds(requested, 'timeout');
  if (requested < -1) throw badRequest('resume timeout must be -1 (never), 0 (keep) or a positive number of seconds');
  return windowFrom(now, requested);
}

/** set_timeout: replaces the timeout and starts its window now; it can shorten the deadline. */
export function atSetTimeout(now: number, requested: number): Deadline {
  checkSeconds(requested, 'timeout');
  if (requested < -1) throw badRequest('timeout must be -1 (never), 0 (immediate) or a positive number of seconds');
  return windowFrom(now, requested);
}

/** refresh(duration?): extends the deadline to at least now + duration (default: the timeout length). */
export function atRefresh(now: number, cur: Deadline, durationSec: number | undefined): Deadline {
  if (durationSec !== undefined && durationSec !== null) {
    checkSeconds(durationSec, 'duration');
    if (durationSec < 0) throw badRequest('duration must be a non-negative number of seconds');
  }
  if (cur.endAt === null) return cur;
  const len = durationSec ?? cur.timeoutSec;
  const wanted = now + Math.max(0, len) * 1000;
  return wanted > cur.endAt ? { timeoutSec: cur.timeoutSec, endAt: wanted } : cur;
}

/** Activity on a running sandbox resets its idle clock (never shortens a longer deadline). */
export function atActivity(now: number, cur: Deadline): Deadline {
  if (cur.endAt === null || cur.timeoutSec <= 0) return cur;
  const wanted = now + cur.timeoutSec * 1000;
  return wanted > cur.endAt ? { timeoutSec: cur.timeoutSec, endAt: wanted } : cur;
}

/** The idle clock restarts with the same length (auto-resume, connect to a paused sandbox). */
export function restartWindow(now: number, cur: Deadline): Deadline {
  if (cur.timeoutSec < 0) return { timeoutSec: NEVER, endAt: null };
  const wanted = now + cur.timeoutSec * 1000;
  return { timeoutSec: cur.timeoutSec, endAt: cur.endAt !== null && cur.endAt > wanted ? cur.endAt : wanted };
}

/** Pause leaves a finite deadline unchanged. */
export function atPause(cur: Deadline): Deadline {
  return cur;
}
