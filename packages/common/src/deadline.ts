/**
 * Waiting on work for a bounded time, with the timer cleared however the wait ends: several
 * modules raced their work against a hand-made timer, and one left its timer running (holding
 * the event loop open after the work had answered).
 */

/** The work's outcome, or a rejection with late()'s error once `ms` have passed. The work itself goes on. */
export function withDeadline<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(late()), ms);
    work.then(
      (value) => { clearTimeout(timer); resolve(value); },
      (err: unknown) => { clearTimeout(timer); reject(err); },
    );
  });
}

/**
 * The work's value, or undefined once `ms` have passed without an answer (the work goes on);
 * a rejection before then is the caller's, as from the work itself.
 */
export function waitAtMost<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise<T | undefined>((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    work.then(
      (value) => { clearTimeout(timer); resolve(value); },
      (err: unknown) => { clearTimeout(timer); reject(err); },
    );
  });
}
