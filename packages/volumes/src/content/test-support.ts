/** Helpers shared by the content tests (not exported from the package). */
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { SvcError } from '@svc/common';

/** A temp dir holding `vol` (a volume's root) and `outside` (what must never be touched). */
export interface Sandbox {
  base: string;
  root: string;
  outside: string;
  cleanup(): Promise<void>;
}

export async function makeSandbox(): Promise<Sandbox> {
  const base = await mkdtemp(join(tmpdir(), 'svc-volcontent-'));
  const root = join(base, 'vol');
  const outside = join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  return { base, root, outside, cleanup: () => rm(base, { recursive: true, force: true }) };
}

/** Asserts that `p` rejects with an SvcError of `status`; returns it. */
export async function rejectsWith(p: Promise<unknown>, status: number, message?: RegExp): Promise<SvcError> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof SvcError, `expected an SvcError ${status}, got ${caught === undefined ? 'success' : String((caught as Error)?.stack ?? caught)}`);
  assert.equal(caught.status, status, `status of: ${caught.message}`);
  if (message) assert.match(caught.message, message);
  return caught;
}

export function bodyOf(text: string | Buffer): Readable {
  return Readable.from([Buffer.from(text)]);
}

/** A body that yields `first` and then fails, like a client that went away midway. */
export function failingBody(first: string): AsyncIterable<Uint8Array> {
  return (async function* () {
    yield Buffer.from(first);
    throw new Error('client went away');
  })();
}

export async function streamText(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

export async function names(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

/** Resolves `p`, or rejects if it takes longer than `ms` (a hang is a failure, not a stuck test). */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms); });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
