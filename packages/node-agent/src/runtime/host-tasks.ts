import { readFile } from 'node:fs/promises';

/**
 * Host tasks (processes and threads) for gVisor sandboxes: a cap on all of this agent's
 * sandboxes together (the parent cgroup's pids.max) and one on each sandbox (its own), so that
 * no sandbox can take the host's last tasks, and no single one all of its neighbours'
 * (docs/decisions.md, "Host tasks of a gVisor sandbox").
 *
 * Why a host cap at all: gVisor enforces RLIMIT_NPROC per uid inside, but root in a sandbox can
 * switch uids, and each further uid brings a fresh allowance. Measured on this machine (runsc
 * 20221219, ptrace): a bomb over a few uids reached 456 processes and 4,912 host tasks within
 * seconds, heading for the host's limit. Under ptrace a sandbox's host tasks are many: 60 to 66
 * for an idle one, 7 to 11 for each process in it, and the stubs of ended processes stay pooled
 * and gain threads under churn (100 sleeps started and killed 16 times reached 6,446).
 */
export interface TaskCaps {
  /** pids.max of the agent's parent cgroup: every sandbox of this agent together. */
  allSandboxes: number;
  /** pids.max of one sandbox's cgroup. */
  perSandbox: number;
}

/** Host tasks left to everything else on the node: a quarter of the host's, at least this many (at most half). */
const RESERVED_FLOOR = 4_096;
/** Room for an idle sandbox's sentry, gofer and stubs, and the tasks each process of its limit may cost. */
const IDLE_SANDBOX_TASKS = 512;
const TASKS_PER_PROCESS = 24;
/** One sandbox may hold this share of the sandboxes' budget even when its process limit is lower. */
const SHARE_OF_ALL = 8;

/**
 * The caps for a host that allows `hostLimit` tasks (min of kernel.threads-max and
 * kernel.pid_max) and a sandbox whose RLIMIT_NPROC is `maxProcesses`. A sandbox gets the larger
 * of what its process limit needs and an eighth of the sandboxes' budget, so that a program
 * that refills its process limit again and again (whose stubs pile up) runs for long before
 * it meets the cap: the cap is a backstop for the host, not a second process limit.
 */
export function taskCaps(hostLimit: number, maxProcesses: number): TaskCaps {
  const reserved = Math.min(Math.ceil(hostLimit / 2), Math.max(RESERVED_FLOOR, Math.ceil(hostLimit / 4)));
  const allSandboxes = hostLimit - reserved;
  const own = IDLE_SANDBOX_TASKS + TASKS_PER_PROCESS * maxProcesses;
  return { allSandboxes, perSandbox: Math.min(allSandboxes, Math.max(own, Math.floor(allSandboxes / SHARE_OF_ALL))) };
}

/** How many tasks the host allows: the lower of kernel.threads-max and kernel.pid_max. */
export async function hostTaskLimit(procSys = '/proc/sys/kernel'): Promise<number> {
  const read = async (name: string) => {
    const n = Number((await readFile(`${procSys}/${name}`, 'utf8')).trim());
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${procSys}/${name} holds no task count`);
    return n;
  };
  return Math.min(await read('threads-max'), await read('pid_max'));
}
