import type { InstanceResources } from './driver.ts';

const MB = 1024 * 1024;
const CFS_PERIOD_US = 100_000;
/** gVisor's sentry and gofer themselves, beside what the sandbox's processes use. */
const SENTRY_OVERHEAD_MB = 64;
/** Under ptrace each process in the sandbox costs about 0.45 MB of host memory (stub process, page tables) that gVisor does not count as the sandbox's. */
const HOST_MB_PER_PROCESS = 0.5;
/**
 * How far a fast allocation may run past the limit before envd's memory guard kills it. The
 * guard reads fast once the node agent's watch (every 500 ms) alerts it, then every 50 ms; a
 * Node.js Buffer loop allocates about 500 MB/s under ptrace, and on a busy host the alert comes
 * late: 128 MB was seen to let the host's OOM killer take the whole sandbox in a full test run.
 * The headroom is a limit, not a reservation: admission goes by measured memory.
 */
const GUARD_OVERSHOOT_MB = 384;

/**
 * The limits one gVisor sandbox runs under, VM-like: the sandbox sees `memoryMB` (gVisor's
 * /proc/meminfo and envd's memory guard, which kills the largest process when it is full),
 * while the host cgroup gets headroom above that, so the host's OOM killer (which can only
 * kill the whole sentry) is a last resort. Processes are capped by RLIMIT_NPROC, which the
 * sentry enforces inside (EAGAIN); the host pids limit is no per-process cap (the sentry's own
 * threads and ptrace stubs count there, 7 to 11 host tasks a process and more under churn),
 * only a backstop for the host (host-tasks.ts).
 */
export interface SandboxLimits {
  /** What the sandbox sees as its memory (the OCI limit: runsc derives --total-memory from it). */
  guestMemoryBytes: number;
  /** The host cgroup's memory.limit_in_bytes, written after runsc made the cgroup. */
  hostMemoryBytes: number;
  /** RLIMIT_NPROC of PID 1, inherited by every process in the sandbox. */
  maxProcesses: number;
  cpuQuotaUs: number;
  cpuPeriodUs: number;
  diskBytes: number;
}

export function sandboxLimits(r: InstanceResources): SandboxLimits {
  const maxProcesses = Math.min(1024, Math.max(256, Math.round(r.memoryMB / 2)));
  const headroomMB = SENTRY_OVERHEAD_MB + GUARD_OVERSHOOT_MB + Math.ceil(maxProcesses * HOST_MB_PER_PROCESS);
  return {
    guestMemoryBytes: r.memoryMB * MB,
    hostMemoryBytes: (r.memoryMB + headroomMB) * MB,
    maxProcesses,
    cpuQuotaUs: Math.round(r.cpuCount * CFS_PERIOD_US),
    cpuPeriodUs: CFS_PERIOD_US,
    diskBytes: r.diskSizeMB * MB,
  };
}
