import { basename } from 'node:path';
import { CommandError, type RunResult } from '../host/exec.ts';

/**
 * A failure in words a team may read (docs/security.md, "What a failed create, resume or
 * snapshot says"): never a host command's line nor a path of the node's host. A CommandError's
 * message is `tar --extract --file=<stateDir>/layers/<id>.tar ... -C <stateDir>/instances/...`,
 * which until 2026-12-01 reached the team; the node's log keeps it whole (errors.ts).
 */
export function publicReason(err: unknown): string {
  if (err instanceof CommandError) {
    const what = err.what ?? `the host command ${basename(err.argv[0] ?? 'command')}`;
    const line = ownLine(err.argv, err.result);
    return `${what} failed${line ? `: ${line}` : ''}`;
  }
  return withoutHostPaths((err as Error)?.message ?? String(err));
}

/**
 * An absolute path: a `/` that starts a word, and what follows up to a space, quote or separator
 * (a colon too where one ends the path, as `<path>: No such file` has it).
 */
const HOST_PATH = /(^|[\s'"=(<[,])\/(?:[^\s'"`,;)\]>:]|:(?!\s|$))*/g;

const HAS_HOST_PATH = new RegExp(HOST_PATH.source);

/** `text` with every absolute path in it replaced: the node's paths are its operator's to read, not a team's. */
function withoutHostPaths(text: string): string {
  return text.replace(HOST_PATH, '$1(a path on the node)');
}

/** tar's closing lines, which say only that an earlier line said what failed. */
const CLOSING = /Exiting with failure status due to previous errors|Error is not recoverable: exiting now/;

/**
 * The command's own first line of error (tar's `tar: ./a: Cannot open: File name too long`),
 * without its program's name; none when that line names a host path (a guest's file is named
 * `./...` in a capture's or restore's tar, which is the team's own).
 */
function ownLine(argv: string[], result: RunResult): string | undefined {
  const programs = new Set(argv.filter((a) => !a.startsWith('-')).map((a) => basename(a)));
  const lines = (result.stderr || result.stdout).split('\n').map((l) => l.trim()).filter((l) => l && !CLOSING.test(l));
  const first = lines[0];
  if (!first) return result.code >= 128 ? 'it was ended by a signal' : undefined;
  const m = /^([\w.+-]+): (.*)$/.exec(first);
  const line = m && programs.has(m[1]!) ? m[2]! : first;
  return HAS_HOST_PATH.test(line) ? undefined : line;
}
