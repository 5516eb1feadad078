import type { BuildRepo } from './repo.ts';

/** A build log entry's level (E2B's). */
export type Level = 'debug' | 'info' | 'warn' | 'error';

/** Writes one entry to a build's log. */
export type BuildLog = (level: Level, message: string) => Promise<void>;

/** The log of build `buildId`: entries numbered in the order they are written. */
export function openBuildLog(repo: BuildRepo, buildId: string): BuildLog {
  let seq = 0;
  return async (level, message) => {
    await repo.appendLog(buildId, seq++, { at: Date.now(), level, message });
  };
}
