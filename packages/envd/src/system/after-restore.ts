/**
 * The clock and the kernel's random pool renewed after a microvm guest is restored from a saved
 * state (docs/runtimes.md, "Clock and randomness after every restore"). The root work is
 * svc-sudo's (packages/node-agent/native/sudo.c): envd starts `svc-sudo --after-restore-service`
 * once at boot, so it is already running in every guest restored from that state, and a renewal
 * is one line to it and one line back. Starting a process instead, the first in a restored
 * guest, costs about 140 ms under TCG (a new QEMU translates fork and exec afresh).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ConnectError } from '../connect/code.ts';

/** What the node agent sends: the host's time, and random bytes from the host. */
export interface Renewal {
  timeMs: number;
  /** 1 to 512 bytes in hex. */
  seed: string;
}

const ANSWER_TIMEOUT_MS = 10_000;

/** A renewal's body checked: a clear 400 for anything else (never a line the helper misreads). */
export function parseRenewal(body: unknown): Renewal {
  const r = body as Partial<Renewal> | null;
  if (typeof r !== 'object' || r === null || Array.isArray(r)) throw new ConnectError('invalid_argument', 'expected a JSON object {timeMs, seed}');
  if (typeof r.timeMs !== 'number' || !Number.isSafeInteger(r.timeMs) || r.timeMs <= 0) throw new ConnectError('invalid_argument', 'timeMs must be a positive integer (milliseconds since the epoch)');
  if (typeof r.seed !== 'string' || !/^(?:[0-9a-f]{2}){1,512}$/i.test(r.seed)) throw new ConnectError('invalid_argument', 'seed must be 1 to 512 bytes in hex');
  return { timeMs: r.timeMs, seed: r.seed };
}

export class AfterRestore {
  private helper: ChildProcess | undefined;
  private readonly waiting: Array<{ resolve(line: string): void; reject(err: Error): void }> = [];
  /** One request at a time: answers come back in order, and a renewal is rare. Never rejects. */
  private last: Promise<unknown> = Promise.resolve();

  private constructor(private readonly path: string, private readonly log: (line: string) => void) {}

  /** Starts the helper program `path` (svc-sudo); envd runs as root, and so does the helper. */
  static start(path: string, log: (line: string) => void = console.error): AfterRestore {
    const a = new AfterRestore(path, log);
    a.startHelper();
    return a;
  }

  private startHelper(): void {
    const child = spawn(this.path, ['--after-restore-service'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.helper = child;
    createInterface({ input: child.stdout! }).on('line', (line) => this.waiting.shift()?.resolve(line));
    child.stderr!.setEncoding('utf8').on('data', (text: string) => this.log(`envd: after-restore helper: ${text.trimEnd()}`));
    // A write after the helper died fails here too; the exit below says so and rejects the waiters.
    child.stdin!.on('error', (err) => this.log(`envd: after-restore helper's input: ${err.message}`));
    const gone = (why: string) => {
      if (this.helper !== child) return;
      this.helper = undefined;
      this.log(`envd: after-restore helper ${why}; renewals start svc-sudo --after-restore instead`);
      for (const w of this.waiting.splice(0)) w.reject(new Error(`the after-restore helper ${why}`));
    };
    child.on('error', (err) => gone(`failed: ${err.message}`));
    child.on('exit', (code, signal) => gone(`ended (${signal ?? `exit ${code}`})`));
  }

  /** Sets the guest's clock and reseeds its kernel's random pool; rejects with the helper's reason. */
  renew(r: Renewal): Promise<void> {
    const next = this.last.then(() => this.renewNow(r));
    this.last = next.catch(() => { /* the caller gets this failure; the queue goes on */ });
    return next;
  }

  private async renewNow(r: Renewal): Promise<void> {
    const helper = this.helper;
    // The helper gone (killed in the guest): the one-shot form does the same work.
    if (!helper) return this.renewOnce(r);
    const answer = await new Promise<string>((resolve, reject) => {
      // A late answer would be read as the next request's: a helper that does not answer is ended.
      const timer = setTimeout(() => { reject(new Error('the after-restore helper did not answer')); helper.kill('SIGKILL'); }, ANSWER_TIMEOUT_MS);
      const entry = { resolve: (line: string) => { clearTimeout(timer); resolve(line); }, reject: (err: Error) => { clearTimeout(timer); reject(err); } };
      this.waiting.push(entry);
      helper.stdin!.write(`${r.timeMs} ${r.seed}\n`);
    });
    if (answer !== 'ok') throw new Error(answer.replace(/^error: /, ''));
  }

  private renewOnce(r: Renewal): Promise<void> {
    return new Promise((resolve, reject) => {
      execFile(this.path, ['--after-restore', String(r.timeMs), r.seed], { timeout: ANSWER_TIMEOUT_MS }, (err, _stdout, stderr) => {
        if (err) reject(new Error(stderr.trim() || err.message));
        else resolve();
      });
    });
  }
}
