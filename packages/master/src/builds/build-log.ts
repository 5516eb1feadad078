import type { BuildRepo } from './repo.ts';

/** A build log entry's level (E2B's). */
export type Level = 'debug' | 'info' | 'warn' | 'error';

/** Writes one entry to a build's log. */
export type BuildLog = (level: Level, message: string) => Promise<void>;

/**
 * The longest entry, in UTF-16 units (at most 48 KiB of UTF-8, within MySQL's 64 KiB text): a
 * step's header repeats its arguments, each up to 64 KB, and on MySQL a longer entry failed the
 * build once its steps had run. A step's output is cut the same (step-output.ts).
 */
export const LOG_ENTRY_MAX = 16 * 1024;

/** The log of build `buildId`: entries numbered in the order they are written. */
export function openBuildLog(repo: BuildRepo, buildId: string): BuildLog {
  let seq = 0;
  return async (level, whole) => {
    const message = whole.length > LOG_ENTRY_MAX ? `${whole.slice(0, LOG_ENTRY_MAX)} … (${whole.length - LOG_ENTRY_MAX} more characters)` : whole;
    await repo.appendLog(buildId, seq++, { at: Date.now(), level, message });
  };
}
