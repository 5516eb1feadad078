import { posix } from 'node:path';
import type { ResolvedTemplate } from '../sandboxes/ports.ts';
import type { Step } from './build-spec.ts';

/**
 * What ENV, USER and WORKDIR steps set for the steps after them, and for the start command.
 * `workdir` absent: the user's home, where envd and the node agent start a command that names none.
 */
export interface StepState { user: string; workdir?: string; env: Record<string, string> }

/** E2B's builds run their steps as `user` unless a USER step or the base says otherwise. */
const DEFAULT_USER = 'user';

/** Where a build's steps start: the base's recorded user, directory and environment (an image's ENV). */
export function startState(base: ResolvedTemplate): StepState {
  return { user: base.defaultUser ?? DEFAULT_USER, ...(base.defaultWorkdir ? { workdir: base.defaultWorkdir } : {}), env: { ...base.envVars } };
}

/** The state after a step: the one place ENV, USER and WORKDIR are interpreted. */
export function applyStep(state: StepState, step: Step): StepState {
  const args = step.args ?? [];
  if (step.type === 'ENV') {
    const env = { ...state.env };
    for (let k = 0; k + 1 < args.length; k += 2) env[args[k]] = args[k + 1];
    return { ...state, env };
  }
  if (step.type === 'USER') return { ...state, user: args[0] };
  if (step.type === 'WORKDIR') return { ...state, workdir: posix.resolve(state.workdir ?? homeOf(state.user), args[0]) };
  return state;
}

/** The home a relative WORKDIR is resolved against when none was set (Debian's layout). */
export function homeOf(user: string): string {
  return user === 'root' ? '/root' : `/home/${user}`;
}
