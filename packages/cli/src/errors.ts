/**
 * How the CLI ends on failure: one line on stderr and a non-zero exit code
 * (2 for usage errors, 1 for everything else).
 */
import { SandboxError } from '@svc/sdk';

const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** The command line itself is wrong (a missing or malformed argument). */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A failure whose message is already what the user should read. */
export class CliError extends Error {
  override name = 'CliError';
}

export function exitCodeFor(err: unknown): number {
  return err instanceof UsageError ? EXIT_USAGE : EXIT_FAILURE;
}

export function errorLine(err: unknown): string {
  if (err instanceof SandboxError) {
    const status = err.status ? ` (HTTP ${err.status}${err.code !== undefined && err.code !== err.status ? `, code ${err.code}` : ''})` : '';
    return `svc: ${err.message}${status}`;
  }
  if (err instanceof Error) return `svc: ${err.message}`;
  return `svc: ${String(err)}`;
}
