import { posix } from 'node:path';
import { toSvcError } from '@svc/common';
import type { ExecInput } from '@svc/contracts/node-agent';
import { shellQuote } from '../sandboxes/start-command.ts';
import type { BuildLog } from './build-log.ts';
import type { Step } from './build-spec.ts';
import type { BuildFiles, BuildNodes } from './ports.ts';
import { StepOutput } from './step-output.ts';
import { homeOf, type StepState } from './step-state.ts';

/** The longest a RUN step may take (and a build may stay silent, with a margin: service.ts). */
export const STEP_TIMEOUT_MS = 20 * 60_000;

/** A step that failed: its number in E2B's counting (1 is the first step, `base` the start). */
export class StepFailed extends Error {
  constructor(readonly step: string, message: string) { super(message); }
}

/** The build sandbox a step runs in: its node agent, and where COPY steps' files come from. */
interface StepSandbox {
  node: Awaited<ReturnType<BuildNodes['client']>>;
  sandboxId: string;
  /** The build's team, whose uploaded files its COPY steps read. */
  teamId: string;
  files: BuildFiles;
  log: BuildLog;
}

/**
 * COPY's move, as root in the step's WORKDIR: "$1" what the source names in the unpacked archive,
 * "$2" the destination (relative to WORKDIR; a trailing / means a directory), "$3" the owner,
 * "$4" the mode or empty, "$5" the unpack directory, removed at the end. Docker's COPY semantics:
 * a directory's contents merge into the destination, a file or symlink lands at it or in it.
 */
const COPY_SCRIPT = [
  'src="$1"; dest="$2"; owner="$3"; mode="$4"',
  'case "$dest" in /*) ;; *) dest="$(pwd)/$dest" ;; esac',
  'if [ ! -e "$src" ] && [ ! -L "$src" ]; then echo "COPY: ${src#$5/} is not among the uploaded files" >&2; exit 1; fi',
  'if [ -d "$src" ] && [ ! -L "$src" ]; then',
  '  chown -R "$owner" "$src" && { [ -z "$mode" ] || chmod -R "$mode" "$src"; } || exit 1',
  // GNU tar keeps what the destination has (a symlink to a directory, a directory's owner); an
  // image with another tar (BusyBox) merges without those options.
  '  if tar --version 2>/dev/null | grep -q GNU; then keep="--keep-directory-symlink --no-overwrite-dir"; else keep=""; fi',
  '  mkdir -p "$dest" && (cd "$src" && tar -cf - .) | tar -xf - -C "$dest" $keep || exit 1',
  'else',
  '  chown -h "$owner" "$src" || exit 1',
  '  if [ -n "$mode" ] && [ ! -L "$src" ]; then chmod "$mode" "$src" || exit 1; fi',
  '  case "$dest" in */) mkdir -p "$dest" ;; *) mkdir -p "$(dirname "$dest")" ;; esac || exit 1',
  '  mv -f "$src" "$dest" || exit 1',
  'fi',
  'rm -rf "$5"',
].join('\n');

/** WORKDIR: the directories it makes are the current user's ("$2"), as E2B's are; existing ones keep their owner. */
const WORKDIR_SCRIPT = 'd="$1"; first=""; while [ ! -e "$d" ]; do first="$d"; d="$(dirname "$d")"; done; [ -z "$first" ] || { mkdir -p "$1" && chown -R "$2" "$first"; }';

/** USER: a user the image lacks is made (with a home and bash), as E2B's builder makes it. */
const USER_SCRIPT = 'id -u "$1" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$1"';

/**
 * Runs step `n` in the build sandbox: `state` is what the steps before it set, `next` what this
 * one sets (applyStep); a RUN step is cut at `deadline`, the build's limit. ENV only sets state.
 */
export async function runStep(sbx: StepSandbox, step: Step, n: string, state: StepState, next: StepState, deadline: number): Promise<void> {
  const args = step.args ?? [];
  if (step.type === 'WORKDIR') {
    await exec(sbx, { command: WORKDIR_SCRIPT, args: [next.workdir!, `${state.user}:`], user: 'root', state: { ...state, workdir: '/' } }, n);
  } else if (step.type === 'USER') {
    await exec(sbx, { command: USER_SCRIPT, args: [next.user], user: 'root', state: { ...state, workdir: '/' } }, n);
  } else if (step.type === 'RUN') {
    await exec(sbx, { command: args[0], user: args[1] || state.user, state, timeoutMs: Math.max(1_000, Math.min(STEP_TIMEOUT_MS, deadline - Date.now())) }, n);
  } else if (step.type === 'COPY') {
    await copy(sbx, step, state, n);
  }
}

/** The part of a COPY source before its first glob: the SDK's archive holds only what matched below it. */
function copySourceBase(src: string): string {
  const parts = src.replace(/^\.\//, '').split('/').filter((p) => p && p !== '.');
  const glob = parts.findIndex((p) => /[*?[{]/.test(p));
  return (glob < 0 ? parts : parts.slice(0, glob)).join('/');
}

/**
 * A COPY step: the node agent feeds the uploaded archive to tar in the sandbox, then COPY_SCRIPT
 * moves what the source names to the destination with its owner and mode (docs/templates.md).
 */
async function copy(sbx: StepSandbox, step: Step, state: StepState, n: string): Promise<void> {
  const [src, dest, owner, mode] = step.args ?? [];
  const input = await sbx.files.input(step.filesHash!, sbx.teamId);
  if (!input) throw new StepFailed(n, `step ${n}: the files of COPY ${src} are gone from the store; build again to upload them`);
  const dir = `/tmp/.svc-copy-${n}-${step.filesHash!.slice(0, 16)}`;
  const unpack = step.gzip === false ? 'tar -xf -' : 'tar -xzf -';
  await exec(sbx, { command: `rm -rf "$1" && mkdir -p "$1" && ${unpack} -C "$1"`, args: [dir], user: 'root', state: { ...state, workdir: '/' }, stdin: input }, n);
  const who = owner || state.user;
  // Run as root, but where the step's user is: a relative destination is under its WORKDIR, else its home.
  await exec(sbx, {
    command: COPY_SCRIPT, args: [posix.join(dir, copySourceBase(src)), dest, who.includes(':') ? who : `${who}:`, mode ?? '', dir], user: 'root',
    state: { ...state, workdir: state.workdir ?? homeOf(state.user) },
  }, n);
}

async function exec(
  sbx: StepSandbox,
  c: { command: string; args?: string[]; user: string; state: { workdir?: string; env: Record<string, string> }; stdin?: ExecInput; timeoutMs?: number },
  step: string,
): Promise<void> {
  // Arguments reach the command as "$1"…, quoted, so a path is never re-read by the shell.
  const command = c.args?.length ? `set -- ${c.args.map(shellQuote).join(' ')}; ${c.command}` : c.command;
  const output = new StepOutput(sbx.log);
  const r = await sbx.node.exec(sbx.sandboxId, { command, user: c.user, ...(c.state.workdir ? { cwd: c.state.workdir } : {}), envVars: c.state.env, timeoutMs: c.timeoutMs ?? STEP_TIMEOUT_MS, ...(c.stdin ? { stdin: c.stdin } : {}) }, (stream, text) => output.add(stream, text))
    .catch(async (err) => {
      await output.end().catch(() => { /* the step's own failure is the one to report */ });
      throw new StepFailed(step, `step ${step} could not run: ${toSvcError(err).message}`);
    });
  await output.end();
  if (r.exitCode !== 0) {
    const last = [...r.stderr.trim().split('\n'), ...r.stdout.trim().split('\n')].filter(Boolean).slice(-3).join(' | ');
    throw new StepFailed(step, `step ${step} exited with code ${r.exitCode}${r.exitCode === 124 ? ` (killed after ${Math.round((c.timeoutMs ?? STEP_TIMEOUT_MS) / 1000)} s)` : ''}${last ? `: ${last}` : ''}`);
  }
}
