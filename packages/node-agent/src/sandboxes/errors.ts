import { SvcError, type Logger } from '@svc/common';
import type { CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { publicReason } from './public-reason.ts';

/** Where a failure's whole text goes: the node's log, with the sandbox it happened to. */
export interface FailureLog {
  logger: Logger;
  sandboxId: string;
}

/**
 * A runtime failure as an API error: an SvcError as it is (its words are written for the
 * caller), anything else a 500 that says what failed in words a team may read (public-reason.ts);
 * its whole text, command line and host paths included, goes to the node's log.
 */
export function wrap(prefix: string, err: unknown, log: FailureLog): SvcError {
  if (err instanceof SvcError) return err;
  log.logger.error({ sandboxId: log.sandboxId, err: (err as Error)?.message ?? String(err) }, prefix);
  return new SvcError(500, `${prefix}: ${publicReason(err)}`);
}

/** A failed create as an API error: 504 when its time ran out, else what failed (as wrap). */
export function createError(req: CreateSandboxOnNode, err: unknown, signal: AbortSignal, logger: Logger): SvcError {
  if (signal.aborted) {
    if (!(err instanceof SvcError)) logger.error({ sandboxId: req.sandboxId, err: (err as Error)?.message ?? String(err) }, 'create failed after its time ran out');
    // What the launch was waiting for when time ran out (envd's last answer, the console) if it knows.
    const detail = err instanceof SvcError && err.status === 504 ? `: ${err.message}` : '';
    return new SvcError(504, `sandbox ${req.sandboxId}: create did not finish within ${req.timeoutMs} ms${detail}`);
  }
  return wrap(`sandbox ${req.sandboxId}: create failed`, err, { logger, sandboxId: req.sandboxId });
}
