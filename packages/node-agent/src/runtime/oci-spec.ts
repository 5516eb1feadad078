import { SANDBOX_RUNTIME_DIR, SANDBOX_SPAWNER, SANDBOX_SUDO } from './runtime-bundle.ts';
import type { InstanceSpec } from './driver.ts';
import { sandboxLimits } from './sandbox-limits.ts';

const CAPS = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID',
  'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE',
];

/** Tells envd to run its memory guard: gVisor has no OOM killer of its own inside the sandbox. */
const MEMORY_GUARD_ENV = 'SVC_ENVD_MEMORY_GUARD';

/** cgroup cpu.shares: the kernel's default weight, and the weight of a warm-pool sandbox until it is handed out. */
export const NORMAL_CPU_SHARES = 1024;
const BACKGROUND_CPU_SHARES = 32;

/** Tells envd to serve sudo through its helper: gVisor runs every process with "no new privileges". */
export const SUDO_HELPER_ENV = 'SVC_ENVD_SUDO';

/** Tells envd to start its processes through the spawner: a fork of envd is slow under gVisor's ptrace platform. */
const SPAWNER_ENV = 'SVC_ENVD_SPAWNER';

/** The OCI runtime spec of one sandbox: dumb-init → envd as PID 1, the runtime at /.svc, CPU, memory and process limits. */
export function ociSpec(spec: InstanceSpec, rootfsDir: string, cgroupsPath: string, o: { tmpOnDisk: boolean } = { tmpOnDisk: true }): object {
  const limits = sandboxLimits(spec.resources);
  const env = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...spec.env, [MEMORY_GUARD_ENV]: '1', [SUDO_HELPER_ENV]: SANDBOX_SUDO, [SPAWNER_ENV]: SANDBOX_SPAWNER };
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: spec.runtime.initArgs,
      env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      cwd: '/',
      capabilities: { bounding: CAPS, effective: CAPS, permitted: CAPS, inheritable: CAPS },
      rlimits: [
        { type: 'RLIMIT_NOFILE', hard: 1048576, soft: 1048576 },
        // Enforced by the sentry for every uid (the sandbox's processes hold no CAP_SYS_RESOURCE): a fork storm gets EAGAIN.
        { type: 'RLIMIT_NPROC', hard: limits.maxProcesses, soft: limits.maxProcesses },
      ],
    },
    root: { path: rootfsDir, readonly: false },
    hostname: spec.hostname,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      { destination: SANDBOX_RUNTIME_DIR, type: 'bind', source: spec.runtime.dir, options: ['rbind', 'ro'] },
      // /tmp on the sandbox's disk, as in E2B: runsc otherwise mounts an unsized tmpfs over an
      // empty /tmp, held in the sandbox's memory (700 MB written there killed a 512 MB sandbox)
      // and missing from pauses, snapshots and template builds. The bind of the root's own /tmp
      // keeps it in the writable layer, under diskSizeMB (docs/runtimes.md, "/tmp").
      // Only for a /tmp that is a real directory (ensureTmpDir): a symlink would be followed on the host.
      ...(o.tmpOnDisk ? [{ destination: '/tmp', type: 'bind', source: `${rootfsDir}/tmp`, options: ['rbind', 'rw'] }] : []),
      // Volumes: a read-only one refuses every write inside the sandbox, and shows writes made through other mounts.
      ...(spec.mounts ?? []).map((m) => ({ destination: m.path, type: 'bind', source: m.hostPath, options: ['rbind', m.readOnly ? 'ro' : 'rw'] })),
    ],
    linux: {
      // No network namespace here: runsc uses the host stack of the namespace it was started in.
      namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }],
      cgroupsPath,
      resources: {
        cpu: { quota: limits.cpuQuotaUs, period: limits.cpuPeriodUs, shares: spec.background ? BACKGROUND_CPU_SHARES : NORMAL_CPU_SHARES },
        // The sandbox's own size (runsc sizes the sentry's memory from it); the driver raises the host cgroup's limit after start.
        memory: { limit: limits.guestMemoryBytes },
      },
    },
  };
}
