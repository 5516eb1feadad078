import { SANDBOX_RUNTIME_DIR } from './runtime-bundle.ts';
import type { InstanceSpec } from './driver.ts';

const CAPS = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID',
  'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE',
];

const CFS_PERIOD_US = 100_000;

/** The OCI runtime spec of one sandbox: tini → envd as PID 1, the runtime at /.svc, CPU and memory limits. */
export function ociSpec(spec: InstanceSpec, rootfsDir: string, cgroupsPath: string): object {
  const env = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...spec.env };
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: spec.runtime.initArgs,
      env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      cwd: '/',
      capabilities: { bounding: CAPS, effective: CAPS, permitted: CAPS, inheritable: CAPS },
      rlimits: [{ type: 'RLIMIT_NOFILE', hard: 1048576, soft: 1048576 }],
    },
    root: { path: rootfsDir, readonly: false },
    hostname: spec.hostname,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      { destination: SANDBOX_RUNTIME_DIR, type: 'bind', source: spec.runtime.dir, options: ['rbind', 'ro'] },
    ],
    linux: {
      // No network namespace here: runsc uses the host stack of the namespace it was started in.
      namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }],
      cgroupsPath,
      resources: {
        cpu: { quota: Math.round(spec.resources.cpuCount * CFS_PERIOD_US), period: CFS_PERIOD_US },
        memory: { limit: spec.resources.memoryMB * 1024 * 1024 },
      },
    },
  };
}
