/**
 * TEMPORARY ALLOW-LIST: defects the fuzzer finds that are known and being fixed elsewhere.
 * They are still counted and printed (as "known"), but do not fail the test. Remove an entry
 * as soon as its fix lands; an entry that matched nothing in a run is printed as stale.
 */
import type { Outcome } from './send.ts';
import type { Case } from './spec.ts';
import type { Defect } from './verdict.ts';

export interface KnownDefect {
  /** One line: what is wrong and who fixes it. */
  reason: string;
  matches(c: Case, o: Outcome, d: Defect): boolean;
}

export const KNOWN_DEFECTS: KnownDefect[] = [];

export function knownDefect(c: Case, o: Outcome, d: Defect): KnownDefect | undefined {
  return KNOWN_DEFECTS.find((k) => k.matches(c, o, d));
}
