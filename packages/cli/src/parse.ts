/** Parsers for option and argument values; bad input is a UsageError (exit 2). */
import { NEVER_TIMEOUT, SANDBOX_EVENT_TYPES, type SandboxEventType } from '@svc/sdk';
import { UsageError } from './errors.ts';

/** `k=v` pairs (repeatable option) into a map. */
export function parsePairs(values: string[] | undefined, what: string): Record<string, string> | undefined {
  if (!values || values.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const v of values) {
    const i = v.indexOf('=');
    if (i <= 0) throw new UsageError(`${what} must look like key=value (got ${JSON.stringify(v)})`);
    out[v.slice(0, i)] = v.slice(i + 1);
  }
  return out;
}

/** Collects a repeatable option into a list (commander's reducer). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Seconds as given on the command line: an integer, -1 meaning never. */
export function parseSeconds(value: string, what: string): number {
  if (!/^-?\d+$/.test(value.trim())) throw new UsageError(`${what} must be a whole number of seconds (got ${JSON.stringify(value)})`);
  const n = Number(value);
  if (n < -1) throw new UsageError(`${what} must be -1 (never) or more`);
  return n;
}

/** A count as given on the command line: a whole number (its range is the server's to say). */
export function parseCount(value: string, what: string): number {
  if (!/^\d+$/.test(value.trim())) throw new UsageError(`${what} must be a whole number (got ${JSON.stringify(value)})`);
  return Number(value);
}

/** Seconds to the SDK's milliseconds; -1 stays NEVER_TIMEOUT. */
export function secondsToMs(seconds: number): number {
  return seconds === -1 ? NEVER_TIMEOUT : seconds * 1000;
}

export function parseStates(value: string | undefined): ('running' | 'paused')[] | undefined {
  if (!value) return undefined;
  const states = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of states) if (s !== 'running' && s !== 'paused') throw new UsageError(`--state takes running and/or paused (got ${JSON.stringify(s)})`);
  return states as ('running' | 'paused')[];
}

const EVENT_PREFIX = 'sandbox.lifecycle.';

/** An event type as tables show it: without the prefix every type has. */
export const shortEventType = (type: string) => (type.startsWith(EVENT_PREFIX) ? type.slice(EVENT_PREFIX.length) : type);

/** Event types from a repeatable option, each value one type or a comma list, short (`killed`) or full. */
export function parseEventTypes(values: string[] | undefined, flag: string): SandboxEventType[] | undefined {
  if (!values) return undefined;
  const types = new Set<SandboxEventType>();
  for (const word of values.flatMap((v) => v.split(',')).map((w) => w.trim())) {
    const type = SANDBOX_EVENT_TYPES.find((t) => t === word || t === EVENT_PREFIX + word);
    if (!type) throw new UsageError(`${flag}: unknown event type ${JSON.stringify(word)}; one of ${SANDBOX_EVENT_TYPES.map(shortEventType).join(', ')}`);
    types.add(type);
  }
  return [...types];
}

/** Joins argv words into one shell command; a single word is taken as a shell command line. */
export function shellCommand(words: string[]): string {
  if (words.length === 1) return words[0];
  return words.map(shellQuote).join(' ');
}

function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_\-./=:,@%+]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
