import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SvcError, type Logger } from '@svc/common';
import { run, type RunResult } from '../host/exec.ts';
import { isMountPoint, unmount } from '../host/mounts.ts';
import type { ResourceNames } from '../names.ts';
import type { ExecOptions, InstanceEndCause, InstanceRef, InstanceSpec, InstanceStats, InstanceStatus, PauseResult, RuntimeDriver } from './driver.ts';
import { createCappedTar } from './capped-tar.ts';
import { DiskLayer, LAYER_TAR_FLAGS, RESTORE_FILES } from './disk-layer.ts';
import { NORMAL_CPU_SHARES, ociSpec } from './oci-spec.ts';
import { sandboxLimits } from './sandbox-limits.ts';
import { hostTaskLimit, taskCaps, type TaskCaps } from './host-tasks.ts';
import { ensureTmpDir, placeSandboxFiles } from './rootfs-files.ts';
import { consoleTailOf } from './console-file.ts';
import { STAT_SHIM_PRELOAD } from './runtime-bundle.ts';
import { DiskUsage } from '../host/disk-usage.ts';
import { SandboxCgroups } from './gvisor-cgroups.ts';
import { detachStrayLoopDevices, killStrayProcesses, waitForRunsInFlight } from './gvisor-strays.ts';
import { Runsc } from './runsc.ts';
import { writeExecProcess } from './exec-process.ts';

export interface GvisorOptions {
  /** runsc's --root: container state files of this agent. */
  stateRoot: string;
  names: ResourceNames;
  logger: Logger;
  runscPath?: string;
  /** ptrace works everywhere; kvm where the host offers working KVM. */
  platform?: string;
}

/**
 * gVisor (runsc) sandboxes. This runsc (2022-12) cannot create its own network namespace on
 * this kernel, so each sandbox runs with --network=host inside the per-sandbox namespace the
 * agent made, entered with nsenter (not `ip netns exec`, which remounts /sys). runsc's control
 * socket is abstract and so per namespace: every later command enters the same namespace.
 * Checkpoint is impossible with host networking ("checkpoint not supported when using
 * hostinet") and a failed checkpoint can kill a sandbox on this version, so pause is a freeze.
 * runsc's invocations are runsc.ts; the host cgroups, gvisor-cgroups.ts; the OCI spec, oci-spec.ts.
 */
export class GvisorDriver implements RuntimeDriver {
  readonly kind = 'gvisor' as const;
  readonly pauseKinds = ['freeze' as const, 'filesystem' as const];
  readonly rootfsInput = 'directory' as const;
  private readonly diskUsage = new DiskUsage();
  private readonly cgroups: SandboxCgroups;
  private readonly runsc: Runsc;

  constructor(private readonly o: GvisorOptions) {
    this.cgroups = new SandboxCgroups(o);
    this.runsc = new Runsc(o, this.cgroups);
  }

  async create(spec: InstanceSpec): Promise<void> {
    if (!spec.rootfs.mountDir) throw new Error('gvisor needs the artifact mounted');
    if (spec.layerContents === 'memory') throw new SvcError(409, 'this snapshot holds a microvm sandbox\'s memory; only a node on the microvm runtime starts it (docs/runtimes.md)');
    const paths = this.paths(spec.dir);
    try {
      await paths.layer.create(sandboxLimits(spec.resources).diskBytes);
      if (spec.layerArchive) await run('tar', ['--extract', `--file=${spec.layerArchive}`, ...LAYER_TAR_FLAGS, '--same-permissions', '--same-owner', '-C', paths.upper], { timeoutMs: 600_000, what: RESTORE_FILES });
      await this.boot(spec);
    } catch (err) {
      await this.destroy(spec).catch((e) => this.o.logger.warn({ err: e, instanceId: spec.instanceId }, 'rollback after failed create'));
      throw err;
    }
  }

  /**
   * A filesystem pause: the sandbox's processes are killed (its memory freed) and its rootfs
   * unmounted; the writable layer, namespace and address stay for `reboot`.
   */
  async stop(ref: InstanceRef): Promise<void> {
    const id = this.o.names.container(ref.instanceId);
    await this.endProcesses(ref, id);
    // The next boot makes the cgroups again under the same name: wait until these are gone.
    await this.cgroups.remove(id);
    await this.cgroups.removed(id);
  }

  async keptLayer(ref: InstanceRef): Promise<boolean> {
    return this.paths(ref.dir).layer.ensureMounted();
  }

  /** Boots a stopped instance again on the writable layer it kept (after `stop`). */
  async reboot(spec: InstanceSpec): Promise<void> {
    if (!spec.rootfs.mountDir) throw new Error('gvisor needs the artifact mounted');
    const paths = this.paths(spec.dir);
    if (!(await isMountPoint(paths.layer.mountDir))) throw new Error(`the writable layer of ${spec.instanceId} is not mounted; it cannot be booted again`);
    try {
      await this.boot(spec);
    } catch (err) {
      await this.stop(spec).catch((e) => this.o.logger.warn({ err: e, instanceId: spec.instanceId }, 'stop after a failed reboot'));
      throw err;
    }
  }

  /** Mounts the rootfs (template under the writable layer), places svc's files, and starts runsc. */
  private async boot(spec: InstanceSpec): Promise<void> {
    const id = this.o.names.container(spec.instanceId);
    const paths = this.paths(spec.dir);
    const limits = sandboxLimits(spec.resources);
    for (const d of [paths.rootfs, paths.bundle]) await mkdir(d, { recursive: true });
    await run('mount', ['-t', 'overlay', 'overlay', '-o',
      `lowerdir=${spec.rootfs.mountDir},upperdir=${paths.upper},workdir=${paths.work}`, paths.rootfs]);
    // The image's set-uid sudo cannot raise privileges here; svc's goes through envd (docs/decisions.md).
    await placeSandboxFiles(paths.rootfs, { ...spec.files, '/etc/hostname': `${spec.hostname}\n`, '/etc/ld.so.preload': STAT_SHIM_PRELOAD }, this.o.logger);
    const tmpOnDisk = await ensureTmpDir(paths.rootfs, this.o.logger);
    const cgroupsPath = `/${this.o.names.cgroupParent}/${id}`;
    await writeFile(join(paths.bundle, 'config.json'), JSON.stringify(ociSpec(spec, paths.rootfs, cgroupsPath, { tmpOnDisk })), { mode: 0o600 });
    const tasks = await this.taskCaps(limits.maxProcesses);
    if (tasks) await this.cgroups.limitAllTasks(tasks.allSandboxes);
    await this.runsc.runDetached(spec.netnsPath, id, paths);
    // runsc made the cgroup with the sandbox's own size (what gVisor shows inside); the host
    // limit gets headroom so that envd's memory guard, not the host's OOM killer, acts first.
    await writeFile(this.cgroups.file('memory', id, 'memory.limit_in_bytes'), String(limits.hostMemoryBytes));
    // Written as the memory limit is, before the create returns and anyone's code runs in it.
    if (tasks) await this.cgroups.limitTasks(id, tasks.perSandbox);
  }

  /** The host-task caps (host-tasks.ts); none when the host's limits cannot be read (said in the log). */
  private async taskCaps(maxProcesses: number): Promise<TaskCaps | undefined> {
    try {
      return taskCaps(await hostTaskLimit(), maxProcesses);
    } catch (err) {
      this.o.logger.warn({ err: (err as Error).message }, 'the host\'s task limits are unreadable; this sandbox runs without a host pids cap');
      return undefined;
    }
  }

  async foreground(ref: InstanceRef): Promise<void> {
    await writeFile(this.cgroups.file('cpu', this.o.names.container(ref.instanceId), 'cpu.shares'), String(NORMAL_CPU_SHARES));
  }

  async destroy(ref: InstanceRef): Promise<void> {
    const id = this.o.names.container(ref.instanceId);
    await this.endProcesses(ref, id);
    await this.paths(ref.dir).layer.destroy();
    await this.cgroups.remove(id);
    await rm(ref.dir, { recursive: true, force: true });
  }

  /** Kills the sandbox's processes (paused or not) and unmounts its rootfs; its writable layer stays. */
  private async endProcesses(ref: InstanceRef, id: string): Promise<void> {
    // Frozen tasks take no signal; a paused sandbox is thawed (not resumed) so the kill lands.
    await this.cgroups.setFreezer(id, 'THAWED').catch(() => { /* never frozen, or its cgroup is gone: nothing to thaw */ });
    if (existsSync(this.runsc.stateFile(id)) && !(await this.runsc.killAndForget(id))) {
      const viaNetns = existsSync(ref.netnsPath);
      const r = viaNetns ? await this.runsc.cmd(ref, ['delete', '--force', id], { allowFail: true, timeoutMs: 30_000 }) : undefined;
      if (!r || (r.code !== 0 && existsSync(this.runsc.stateFile(id)))) await this.runsc.forceDelete(id);
    }
    const rootfs = this.paths(ref.dir).rootfs;
    if (await isMountPoint(rootfs)) await unmount(rootfs);
  }

  /**
   * `runsc pause` stops the sandbox's tasks, but gVisor's own sentry and gofer keep a little
   * timer work going (about 0.1% of a core). Freezing their cgroup as well makes a paused
   * sandbox cost no CPU at all. Resume thaws first: runsc talks to the sentry to resume it.
   */
  async pause(ref: InstanceRef): Promise<PauseResult> {
    const id = this.o.names.container(ref.instanceId);
    await this.runsc.cmd(ref, ['pause', id]);
    await this.cgroups.setFreezer(id, 'FROZEN').catch(async (err: Error) => {
      // A cgroup left FREEZING would hold the sentry half-stopped, and runsc could not talk to
      // it on resume: go back to THAWED and keep the runsc pause alone.
      await this.cgroups.setFreezer(id, 'THAWED').catch(() => { /* reported just below, with the freeze's own error */ });
      this.o.logger.warn({ instanceId: ref.instanceId, err: err.message }, 'cgroup freeze failed; the sandbox is paused by runsc alone');
    });
    return { kind: 'freeze' };
  }

  async resume(ref: InstanceRef): Promise<void> {
    const id = this.o.names.container(ref.instanceId);
    await this.cgroups.setFreezer(id, 'THAWED').catch(() => { /* paused by runsc alone (the freeze had failed): runsc resume says what is wrong */ });
    await this.runsc.cmd(ref, ['resume', id]);
  }

  async status(ref: InstanceRef): Promise<InstanceStatus> {
    const id = this.o.names.container(ref.instanceId);
    if (!existsSync(this.runsc.stateFile(id))) return 'missing';
    if (!existsSync(ref.netnsPath)) return 'stopped';
    // A frozen sandbox cannot answer `runsc state`: it is paused.
    const frozen = await readFile(this.cgroups.freezerState(id), 'utf8').catch(() => { /* no freezer cgroup: not frozen; runsc state says the rest */ return ''; });
    if (frozen.trim() === 'FROZEN') return 'paused';
    const r = await this.runsc.cmd(ref, ['state', id], { allowFail: true });
    if (r.code !== 0) return 'stopped';
    const status = (JSON.parse(r.stdout) as { status: string }).status;
    return status === 'running' || status === 'paused' ? status : 'stopped';
  }

  /** The host cgroup's usage: sentry, gofer and the sandbox's memory file. */
  async processesAlive(ref: InstanceRef): Promise<boolean> {
    const pid = (await this.runsc.statePids(this.o.names.container(ref.instanceId)))?.sandbox;
    // A zombie's cmdline reads empty; a reused pid is not runsc's.
    return !!pid && pid > 1 && (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* no such process: it has ended */ return ''; })).includes('runsc');
  }

  async memoryUsedBytes(ref: InstanceRef): Promise<number> {
    return Number((await readFile(this.cgroups.file('memory', this.o.names.container(ref.instanceId), 'memory.usage_in_bytes'), 'utf8')).trim());
  }

  async stats(ref: InstanceRef): Promise<InstanceStats> {
    const container = this.o.names.container(ref.instanceId);
    const paths = this.paths(ref.dir);
    // Read at once, not through the thread pool: a cgroup file is made by the kernel as it is read,
    // and a synchronous read of one costs about 15 µs here where an asynchronous one costs 200
    // (bench/sampler.ts reads every running sandbox every 5 s).
    const read = (controller: string, file: string) => readFileSync(this.cgroups.file(controller, container, file), 'utf8');
    const [cpu, usage, stat] = [read('cpuacct', 'cpuacct.usage'), read('memory', 'memory.usage_in_bytes'), read('memory', 'memory.stat')];
    const cache = Number(/^total_cache (\d+)$/m.exec(stat)?.[1] ?? /^cache (\d+)$/m.exec(stat)?.[1] ?? 0);
    return {
      cpuUsageNs: Number(cpu.trim()),
      memUsedBytes: Math.max(0, Number(usage.trim()) - cache),
      memCacheBytes: cache,
      diskUsedBytes: (await paths.layer.usedBytes()) ?? await this.diskUsage.of(paths.upper),
    };
  }

  /**
   * 'oom' when the host cgroup's OOM killer struck (it can only kill the sentry, so the whole
   * sandbox); 'pids_limit' when its host tasks met their cap (host-tasks.ts): the sentry cannot
   * live without the threads it asked for. Read before destroy.
   */
  async endCause(ref: InstanceRef): Promise<InstanceEndCause | undefined> {
    const id = this.o.names.container(ref.instanceId);
    const text = await readFile(this.cgroups.file('memory', id, 'memory.oom_control'), 'utf8').catch((err: Error) => {
      // Its cgroup already removed: the cause cannot be told, and the end is reported as an exit.
      this.o.logger.warn({ instanceId: ref.instanceId, err: err.message }, 'memory.oom_control unreadable; the sandbox\'s end is reported as an exit');
      return '';
    });
    if (Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0) > 0) return 'oom';
    const refused = await this.cgroups.tasksRefused(id).catch((err: Error) => {
      this.o.logger.warn({ instanceId: ref.instanceId, err: err.message }, 'pids.events unreadable; a sandbox that met its host task cap is reported as an exit');
      return 0;
    });
    if (refused === 0) return undefined;
    this.o.logger.warn({ instanceId: ref.instanceId, refused }, 'the sandbox met its host task cap (pids.max) and ended');
    return 'pids_limit';
  }

  /** Instances with a runsc state file under this agent's root. */
  list(): Promise<string[]> {
    return this.runsc.list();
  }

  async captureLayer(ref: InstanceRef, archivePath: string, maxBytes: number): Promise<void> {
    await createCappedTar(archivePath, [...LAYER_TAR_FLAGS, '--sparse', '-C', this.paths(ref.dir).upper, '.'], { maxBytes, what: 'capturing the sandbox\'s files' });
  }

  async exec(ref: InstanceRef, argv: string[], opts: ExecOptions = {}): Promise<RunResult> {
    const id = this.o.names.container(ref.instanceId);
    if (opts.detach) return this.runsc.execInBackground(ref, id, argv);
    // The command, its environment and its user in a file, not on the command line (exec-process.ts).
    const processFile = await writeExecProcess(this.paths(ref.dir).bundle, argv, opts);
    try {
      return await this.runsc.cmd(ref, ['exec', `--process=${processFile}`, id], { timeoutMs: opts.timeoutMs ?? 30_000, allowFail: true, inputFile: opts.inputFile, onOutput: opts.onOutput });
    } finally {
      await rm(processFile, { force: true });
    }
  }

  async sweep(keep: Set<string>, dirOf: (instanceId: string) => string, netnsOf: (instanceId: string) => string): Promise<void> {
    await waitForRunsInFlight(this.o);
    for (const instanceId of await this.list()) {
      if (!keep.has(instanceId)) await this.destroy({ instanceId, dir: dirOf(instanceId), netnsPath: netnsOf(instanceId) });
    }
    await killStrayProcesses(this.o, keep);
    await detachStrayLoopDevices(this.o, keep, dirOf);
    for (const instanceId of await this.cgroups.list()) {
      if (!keep.has(instanceId)) await this.cgroups.remove(this.o.names.container(instanceId));
    }
  }

  /** Removes the parent cgroups once no sandbox of this agent is left. */
  removeParentCgroups(): Promise<void> {
    return this.cgroups.removeParents();
  }

  /** Resolves when background cgroup removals are done. */
  settled(): Promise<void> {
    return this.cgroups.settled();
  }

  consolePath(ref: InstanceRef): string {
    return this.paths(ref.dir).console;
  }

  consoleTail(ref: InstanceRef, lines = 5): Promise<string> {
    return consoleTailOf(this.paths(ref.dir).console, lines);
  }

  private paths(dir: string) {
    const layer = new DiskLayer(dir);
    return { layer, upper: layer.upper, work: layer.work, rootfs: join(dir, 'rootfs'), bundle: join(dir, 'bundle'), console: join(dir, 'console.log') };
  }
}
