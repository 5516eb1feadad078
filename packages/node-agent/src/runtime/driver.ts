import type { LayerContents, PauseKind, RuntimeKind } from '@svc/contracts/node-agent';
import type { RuntimeBundle } from './runtime-bundle.ts';
import type { RunResult } from '../host/exec.ts';

export interface InstanceResources {
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
}

/** What a driver needs to find an instance again, also after an agent restart. */
export interface InstanceRef {
  instanceId: string;
  /** Directory the driver owns for this instance (bundle, writable layer, snapshot files). */
  dir: string;
  /** The instance's network namespace (veth for gvisor, a tap device inside it for microvm). */
  netnsPath: string;
  /** The sandbox's address, where its envd answers (absent in a sweep, which has only ids). */
  address?: string;
}

export interface InstanceSpec extends InstanceRef {
  /** The template artifact: the ext4 image, and its read-only mount when the driver wants a directory. */
  rootfs: { imagePath: string; mountDir?: string };
  runtime: RuntimeBundle;
  resources: InstanceResources;
  /** Environment of the sandbox's PID 1 (envd passes it on to the processes it starts). */
  env: Record<string, string>;
  hostname: string;
  /** Small files placed into the sandbox's writable layer before boot (e.g. /etc/resolv.conf). */
  files: Record<string, string>;
  /** A captured writable layer (captureLayer's archive) the instance starts from instead of an empty one. */
  layerArchive?: string;
  /** 'memory': `layerArchive` is a captured machine (captureMachine's archive), which the instance resumes. */
  layerContents?: LayerContents;
  /** Host directories (volumes' host paths) bound into the instance at `path`. */
  mounts?: HostMount[];
  /**
   * A warm-pool sandbox: it boots and waits at a low CPU weight, so that on a busy host the
   * sandboxes users hold go first (a refill starts right when a user's create took one).
   * `foreground` gives it the normal weight when it is handed out.
   */
  background?: boolean;
}

export interface HostMount {
  hostPath: string;
  /** Absolute inside the sandbox. */
  path: string;
  readOnly: boolean;
}

export type InstanceStatus = 'running' | 'paused' | 'stopped' | 'missing';
/**
 * Why an instance stopped on its own, when the driver can tell: 'oom' = the host's OOM killer;
 * 'pids_limit' = its host tasks met their cap (runtime/host-tasks.ts).
 */
export type InstanceEndCause = 'oom' | 'pids_limit';

export interface PauseResult {
  kind: PauseKind;
  /** Bytes of the snapshot on disk (snapshot pauses). */
  snapshotBytes?: number;
}

export interface InstanceStats {
  /** CPU time consumed since boot, nanoseconds. */
  cpuUsageNs: number;
  memUsedBytes: number;
  memCacheBytes: number;
  /** Bytes the sandbox wrote to its own writable layer. */
  diskUsedBytes: number;
}

/**
 * One way of running sandboxes. gvisor freezes on pause (memory kept); a microvm driver
 * pauses to a snapshot file in `dir` (nothing left running) and resumes from it, so the
 * interface speaks of pause kinds rather than assuming either.
 */
export interface RuntimeDriver {
  readonly kind: RuntimeKind;
  /** Pause kinds this driver offers on this host, best first. */
  readonly pauseKinds: PauseKind[];
  /** 'directory': give create a mounted rootfs; 'image': the ext4 image is enough. */
  readonly rootfsInput: 'directory' | 'image';
  /**
   * Boots the instance; returns once its PID 1 runs, or, for a `background` instance where the
   * runtime can, 'parked': everything is in place but the guest does not run until `unpark`
   * (microvm: QEMU mapped on its template's memory file, waiting for its device state). Leaves
   * nothing behind when it throws.
   */
  create(spec: InstanceSpec): Promise<void | 'parked'>;
  /** Lets a parked instance run; resolves once its PID 1 runs again (envd answers soon after). */
  unpark?(ref: InstanceRef): Promise<void>;
  /** Stops it and releases everything the driver holds for it (paused or not, never resuming). */
  destroy(ref: InstanceRef): Promise<void>;
  pause(ref: InstanceRef): Promise<PauseResult>;
  /**
   * A filesystem pause: stops the instance's processes and frees their memory, keeping its
   * writable layer for `reboot`. Absent where the runtime cannot (it lacks 'filesystem' in pauseKinds).
   */
  stop?(ref: InstanceRef): Promise<void>;
  /** Why this instance cannot pause with its memory, when it cannot (its pause is then a filesystem pause). */
  memoryPauseBlocked?(ref: InstanceRef): Promise<string | undefined>;
  /** Boots an instance that `stop` stopped, on the writable layer it kept. */
  reboot?(spec: InstanceSpec): Promise<void>;
  /** Whether a stopped instance's writable layer is there to boot from (adoption after an agent restart). */
  keptLayer?(ref: InstanceRef): Promise<boolean>;
  resume(ref: InstanceRef): Promise<void>;
  status(ref: InstanceRef): Promise<InstanceStatus>;
  stats(ref: InstanceRef): Promise<InstanceStats>;
  /**
   * What the instance holds in host memory now (one cheap read). Present where the runtime has
   * no OOM killer inside, so envd's memory guard needs alerting from the host.
   */
  memoryUsedBytes?(ref: InstanceRef): Promise<number>;
  /**
   * Whether the instance's processes still exist, read from the host without waking the
   * sandbox: the liveness sweep asks this of every sandbox every few seconds, and a request
   * to envd costs a sleeping gVisor sandbox about 3 ms of CPU. Absent: the sweep asks envd.
   */
  processesAlive?(ref: InstanceRef): Promise<boolean>;
  /** Why a stopped instance ended, when known; asked before destroy (which drops the evidence). */
  endCause?(ref: InstanceRef): Promise<InstanceEndCause | undefined>;
  /** Gives an instance created with `background` the normal CPU weight. */
  foreground?(ref: InstanceRef): Promise<void>;
  /** Resolves when the driver's background cleanup (gvisor: cgroups of killed sandboxes) is done. */
  settled?(): Promise<void>;
  /** Removes what the driver made for all its sandboxes once none is left (gvisor: parent cgroups). */
  removeParentCgroups?(): Promise<void>;
  /** Removes whatever the driver holds for instances not in `keep` (after a crash). */
  sweep(keep: Set<string>, dirOf: (instanceId: string) => string, netnsOf: (instanceId: string) => string): Promise<void>;
  /** The last lines the instance's PID 1 and envd printed ('' when none): for errors and logs. */
  consoleTail(ref: InstanceRef, lines?: number): Promise<string>;
  /** The file the instance's PID 1 writes to: its log (GET /v1/sandboxes/:id/logs), one entry a line (sandbox-logs.ts). */
  consolePath(ref: InstanceRef): string;
  /**
   * Writes the instance's writable layer (the files it changed over its template: overlay
   * upper with whiteouts and opaque markers) as a tar to `archivePath`. The caller keeps the
   * instance still meanwhile (flushed and paused). The archive may not pass `maxBytes`: tar
   * stops there (capped-tar.ts) and the capture fails.
   */
  captureLayer(ref: InstanceRef, archivePath: string, maxBytes: number): Promise<void>;
  /**
   * Writes a paused instance's whole machine (its disk, memory and what restoring it needs) as
   * a tar to `archivePath`, for `create` with `layerContents: 'memory'`. Absent where the
   * runtime cannot (gvisor here: it pauses by freezing). Held to `maxBytes` as captureLayer.
   */
  captureMachine?(ref: InstanceRef, archivePath: string, maxBytes: number): Promise<void>;
  /**
   * Runs a command in the instance beside envd (builds, snapshots, tests): as root unless
   * `user` says otherwise, its standard input read from the host file `inputFile`, its output
   * given to `onOutput` as it comes besides the whole of it in the result.
   */
  exec(ref: InstanceRef, argv: string[], opts?: ExecOptions): Promise<RunResult>;
}

export type ExecOutput = (stream: 'stdout' | 'stderr', text: string) => void;

export interface ExecOptions {
  detach?: boolean;
  timeoutMs?: number;
  /** The user (name, and the uid and gid the image gives it); root when absent. */
  user?: { name: string; uid: string; gid: string };
  cwd?: string;
  env?: Record<string, string>;
  inputFile?: string;
  onOutput?: ExecOutput;
}
