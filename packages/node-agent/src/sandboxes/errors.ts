import { SvcError } from '@svc/common';
import type { CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { CommandError } from '../host/exec.ts';

/** A runtime failure as an API error: an SvcError as it is, anything else a 500 that says what failed. */
export function wrap(prefix: string, err: unknown): SvcError {
  if (err instanceof SvcError) return err;
  return new SvcError(500, `${prefix}: ${(err as Error).message}`);
}

/** A failed create as an API error: 504 when its time ran out, else what failed. */
export function createError(req: CreateSandboxOnNode, err: unknown, signal: AbortSignal): SvcError {
  if (signal.aborted) {
    // What the launch was waiting for when time ran out (envd's last answer, the console) if it knows.
    const detail = err instanceof SvcError && err.status === 504 ? `: ${err.message}` : '';
    return new SvcError(504, `sandbox ${req.sandboxId}: create did not finish within ${req.timeoutMs} ms${detail}`);
  }
  if (err instanceof SvcError) return err;
  if (err instanceof CommandError) return new SvcError(500, `sandbox ${req.sandboxId}: runtime failed: ${err.message}`);
  return new SvcError(500, `sandbox ${req.sandboxId}: create failed: ${(err as Error).message}`);
}
