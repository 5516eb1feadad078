import { existsSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { SvcError, type Logger } from '@svc/common';
import { CommandError, run, runInBackground, type RunResult } from '../host/exec.ts';
import { isMountPoint, unmount } from '../host/mounts.ts';
import type { ResourceNames } from '../names.ts';
import type { ExecOptions, ExecOutput, InstanceEndCause, InstanceRef, InstanceSpec, InstanceStats, InstanceStatus, PauseResult, RuntimeDriver } from './driver.ts';
import { detachLoopDevice, DiskLayer, LAYER_TAR_FLAGS, loopDevicesUnder } from './disk-layer.ts';
import { NORMAL_CPU_SHARES, ociSpec } from './oci-spec.ts';
import { sandboxLimits } from './sandbox-limits.ts';
import { ensureTmpDir, placeSandboxFiles } from './rootfs-files.ts';
import { appendAgentLine, consoleTailOf } from './console-file.ts';
import { STAT_SHIM_PRELOAD } from './runtime-bundle.ts';
import { DiskUsage } from '../host/disk-usage.ts';

const CGROUP_ROOT = '/sys/fs/cgroup';
const CGROUP_CONTROLLERS = ['blkio', 'cpu', 'cpuacct', 'cpuset', 'devices', 'freezer', 'memory', 'pids', 'systemd'];

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
 */
export class GvisorDriver implements RuntimeDriver {
  readonly kind = 'gvisor' as const;
  readonly pauseKinds = ['freeze' as const, 'filesystem' as const];
  readonly rootfsInput = 'directory' as const;
  private readonly runsc: string;
  private readonly platform: string;
  private readonly diskUsage = new DiskUsage();
  private readonly cgroupJanitor = new Map<string, Promise<void>>();

  constructor(private readonly o: GvisorOptions) {
    this.runsc = o.runscPath ?? 'runsc';
    this.platform = o.platform ?? 'ptrace';
  }

  async create(spec: InstanceSpec): Promise<void> {
    if (!spec.rootfs.mountDir) throw new Error('gvisor needs the artifact mounted');
    if (spec.layerContents === 'memory') throw new SvcError(409, 'this snapshot holds a microvm sandbox\'s memory; only a node on the microvm runtime starts it (docs/runtimes.md)');
    const paths = this.paths(spec.dir);
    try {
      await paths.layer.create(sandboxLimits(spec.resources).diskBytes);
      if (spec.layerArchive) await run('tar', ['--extract', `--file=${spec.layerArchive}`, ...LAYER_TAR_FLAGS, '--same-permissions', '--same-owner', '-C', paths.upper], { timeoutMs: 600_000 });
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
    await this.removeCgroups(id);
    await this.cgroupJanitor.get(id);
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
    await this.runDetached(spec, id, paths);
    // runsc made the cgroup with the sandbox's own size (what gVisor shows inside); the host
    // limit gets headroom so that envd's memory guard, not the host's OOM killer, acts first.
    await writeFile(this.cgroupFile('memory', id, 'memory.limit_in_bytes'), String(limits.hostMemoryBytes));
  }

  async foreground(ref: InstanceRef): Promise<void> {
    await writeFile(this.cgroupFile('cpu', this.o.names.container(ref.instanceId), 'cpu.shares'), String(NORMAL_CPU_SHARES));
  }

  async destroy(ref: InstanceRef): Promise<void> {
    const id = this.o.names.container(ref.instanceId);
    await this.endProcesses(ref, id);
    await this.paths(ref.dir).layer.destroy();
    await this.removeCgroups(id);
    await rm(ref.dir, { recursive: true, force: true });
  }

  /** Kills the sandbox's processes (paused or not) and unmounts its rootfs; its writable layer stays. */
  private async endProcesses(ref: InstanceRef, id: string): Promise<void> {
    // Frozen tasks take no signal; a paused sandbox is thawed (not resumed) so the kill lands.
    await this.setFreezer(ref, 'THAWED').catch(() => { /* never frozen, or its cgroup is gone: nothing to thaw */ });
    if (existsSync(this.stateFile(id)) && !(await this.killAndForget(id))) {
      const viaNetns = existsSync(ref.netnsPath);
      const r = viaNetns ? await this.cmd(ref, ['delete', '--force', id], { allowFail: true, timeoutMs: 30_000 }) : undefined;
      if (!r || (r.code !== 0 && existsSync(this.stateFile(id)))) await this.forceDelete(id);
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
    await this.cmd(ref, ['pause', this.o.names.container(ref.instanceId)]);
    await this.setFreezer(ref, 'FROZEN').catch(async (err: Error) => {
      // A cgroup left FREEZING would hold the sentry half-stopped, and runsc could not talk to
      // it on resume: go back to THAWED and keep the runsc pause alone.
      await this.setFreezer(ref, 'THAWED').catch(() => { /* reported just below, with the freeze's own error */ });
      this.o.logger.warn({ instanceId: ref.instanceId, err: err.message }, 'cgroup freeze failed; the sandbox is paused by runsc alone');
    });
    return { kind: 'freeze' };
  }

  async resume(ref: InstanceRef): Promise<void> {
    await this.setFreezer(ref, 'THAWED').catch(() => { /* paused by runsc alone (the freeze had failed): runsc resume says what is wrong */ });
    await this.cmd(ref, ['resume', this.o.names.container(ref.instanceId)]);
  }

  /** A file of a container's cgroup under one controller (`container` is the runsc container id). */
  private cgroupFile(controller: string, container: string, file: string): string {
    return join(CGROUP_ROOT, controller, this.o.names.cgroupParent, container, file);
  }

  private freezerState(ref: InstanceRef): string {
    return this.cgroupFile('freezer', this.o.names.container(ref.instanceId), 'freezer.state');
  }

  private async setFreezer(ref: InstanceRef, want: 'FROZEN' | 'THAWED'): Promise<void> {
    const file = this.freezerState(ref);
    if (!existsSync(file)) throw new Error(`no freezer cgroup at ${file}`);
    await writeFile(file, want);
    for (let i = 0; i < 200; i++) {
      if ((await readFile(file, 'utf8')).trim() === want) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`freezer did not reach ${want}`);
  }

  async status(ref: InstanceRef): Promise<InstanceStatus> {
    const id = this.o.names.container(ref.instanceId);
    if (!existsSync(this.stateFile(id))) return 'missing';
    if (!existsSync(ref.netnsPath)) return 'stopped';
    // A frozen sandbox cannot answer `runsc state`: it is paused.
    const frozen = await readFile(this.freezerState(ref), 'utf8').catch(() => '');
    if (frozen.trim() === 'FROZEN') return 'paused';
    const r = await this.cmd(ref, ['state', id], { allowFail: true });
    if (r.code !== 0) return 'stopped';
    const status = (JSON.parse(r.stdout) as { status: string }).status;
    return status === 'running' || status === 'paused' ? status : 'stopped';
  }

  /** The host cgroup's usage: sentry, gofer and the sandbox's memory file. */
  async processesAlive(ref: InstanceRef): Promise<boolean> {
    const pid = (await this.statePids(this.o.names.container(ref.instanceId)))?.sandbox;
    // A zombie's cmdline reads empty; a reused pid is not runsc's.
    return !!pid && pid > 1 && (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).includes('runsc');
  }

  async memoryUsedBytes(ref: InstanceRef): Promise<number> {
    return Number((await readFile(this.cgroupFile('memory', this.o.names.container(ref.instanceId), 'memory.usage_in_bytes'), 'utf8')).trim());
  }

  async stats(ref: InstanceRef): Promise<InstanceStats> {
    const container = this.o.names.container(ref.instanceId);
    const paths = this.paths(ref.dir);
    const read = (controller: string, file: string) => readFile(this.cgroupFile(controller, container, file), 'utf8');
    const [cpu, usage, stat] = await Promise.all([read('cpuacct', 'cpuacct.usage'), read('memory', 'memory.usage_in_bytes'), read('memory', 'memory.stat')]);
    const cache = Number(/^total_cache (\d+)$/m.exec(stat)?.[1] ?? /^cache (\d+)$/m.exec(stat)?.[1] ?? 0);
    return {
      cpuUsageNs: Number(cpu.trim()),
      memUsedBytes: Math.max(0, Number(usage.trim()) - cache),
      memCacheBytes: cache,
      diskUsedBytes: (await paths.layer.usedBytes()) ?? await this.diskUsage.of(paths.upper),
    };
  }

  /** 'oom' when the host cgroup's OOM killer struck (it can only kill the sentry, so the whole sandbox). Read before destroy. */
  async endCause(ref: InstanceRef): Promise<InstanceEndCause | undefined> {
    const text = await readFile(this.cgroupFile('memory', this.o.names.container(ref.instanceId), 'memory.oom_control'), 'utf8').catch(() => '');
    return Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0) > 0 ? 'oom' : undefined;
  }

  async list(): Promise<string[]> {
    const ids = new Set<string>();
    const files = await readdir(this.o.stateRoot).catch(() => [] as string[]);
    for (const f of files) {
      const m = /^(.+)_sandbox:(.+)\.state$/.exec(f);
      const inst = m && this.o.names.instanceOfContainer(m[2]);
      if (inst) ids.add(inst);
    }
    return [...ids];
  }

  async captureLayer(ref: InstanceRef, archivePath: string): Promise<void> {
    await run('tar', ['--create', `--file=${archivePath}`, ...LAYER_TAR_FLAGS, '--sparse', '-C', this.paths(ref.dir).upper, '.'], { timeoutMs: 600_000 });
  }

  async exec(ref: InstanceRef, argv: string[], opts: ExecOptions = {}): Promise<RunResult> {
    const id = this.o.names.container(ref.instanceId);
    if (opts.detach) return this.execInBackground(ref, id, argv);
    const flags = [
      ...(opts.user ? [`--user=${opts.user.uid}:${opts.user.gid}`] : []),
      ...(opts.cwd ? [`--cwd=${opts.cwd}`] : []),
      ...Object.entries(opts.env ?? {}).map(([k, v]) => `--env=${k}=${v}`),
    ];
    return this.cmd(ref, ['exec', ...flags, id, ...argv], { timeoutMs: opts.timeoutMs ?? 30_000, allowFail: true, inputFile: opts.inputFile, onOutput: opts.onOutput });
  }

  /**
   * `runsc exec --detach` of this version waits ~9 s for a pid file and then reports failure
   * although the process runs. A foreground `runsc exec` left running in the background does
   * the same job; it ends with the process or the sandbox.
   */
  private async execInBackground(ref: InstanceRef, id: string, argv: string[]): Promise<RunResult> {
    const { code } = await runInBackground('nsenter', [`--net=${ref.netnsPath}`, this.runsc, ...this.globalFlags(), 'exec', id, ...argv], 150);
    return { code, stdout: '', stderr: code ? `runsc exec exited ${code} at once` : '' };
  }


  async sweep(keep: Set<string>, dirOf: (instanceId: string) => string, netnsOf: (instanceId: string) => string): Promise<void> {
    await this.waitForRunsInFlight();
    for (const instanceId of await this.list()) {
      if (!keep.has(instanceId)) await this.destroy({ instanceId, dir: dirOf(instanceId), netnsPath: netnsOf(instanceId) });
    }
    await this.killStrayProcesses(keep);
    await this.detachStrayLoopDevices(keep, dirOf);
    for (const instanceId of await this.listCgroups()) {
      if (!keep.has(instanceId)) await this.removeCgroups(this.o.names.container(instanceId));
    }
  }

  /** Writable-layer loop devices still attached for instances not kept (a lazy unmount after a crash). */
  private async detachStrayLoopDevices(keep: Set<string>, dirOf: (instanceId: string) => string): Promise<void> {
    const instancesRoot = dirname(dirOf('x'));
    for (const { dev, backingFile } of await loopDevicesUnder(instancesRoot)) {
      const instanceId = backingFile.slice(instancesRoot.length + 1).split('/')[0];
      if (instanceId && !keep.has(instanceId)) {
        this.o.logger.info({ dev, instanceId }, 'detaching the loop device of a removed sandbox');
        await detachLoopDevice(dev);
      }
    }
  }

  /** runsc processes of this agent's root whose state file is gone (nothing else would stop them). */
  private async killStrayProcesses(keep: Set<string>): Promise<void> {
    const marker = `--root=${this.o.stateRoot}`;
    for (const pid of await readdir('/proc').catch(() => [] as string[])) {
      if (!/^\d+$/.test(pid)) continue;
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      const argv = cmdline.split('\0');
      if (!argv[0]?.startsWith('runsc') || !argv.includes(marker)) continue;
      const bundle = /\/instances\/([a-z0-9]+)\/bundle/.exec(cmdline)?.[1];
      const container = argv.map((a) => this.o.names.instanceOfContainer(a)).find(Boolean);
      const instanceId = bundle ?? container;
      if (instanceId && !keep.has(instanceId)) { try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ } }
    }
  }

  /**
   * A crashed agent's `runsc run` children keep going and finish the container after the
   * crash: wait for them (bounded), or the sweep would miss a container created just after it.
   */
  private async waitForRunsInFlight(timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const marker = `--root=${this.o.stateRoot}`;
    while (Date.now() < deadline) {
      let busy = false;
      for (const pid of await readdir('/proc').catch(() => [] as string[])) {
        if (!/^\d+$/.test(pid)) continue;
        const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
        if (argv.includes(marker) && (argv.includes('run') || argv.includes('create') || argv.includes('start'))) { busy = true; break; }
      }
      if (!busy) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Removes the parent cgroups once no sandbox of this agent is left. */
  async removeParentCgroups(): Promise<void> {
    for (const c of CGROUP_CONTROLLERS) await rmdir(join(CGROUP_ROOT, c, this.o.names.cgroupParent)).catch(() => { /* still holds sandboxes, or never made */ });
  }

  /** Per-controller cgroup directories of this agent's sandboxes (reconciliation). */
  async listCgroups(): Promise<string[]> {
    const ids = new Set<string>();
    for (const c of CGROUP_CONTROLLERS) {
      for (const d of await readdir(join(CGROUP_ROOT, c, this.o.names.cgroupParent)).catch(() => [] as string[])) {
        const inst = this.o.names.instanceOfContainer(d);
        if (inst) ids.add(inst);
      }
    }
    return [...ids];
  }

  /**
   * Removes a sandbox's cgroups. A killed sandbox's zombies keep them busy until the host's
   * PID 1 reaps them (instant under systemd, seconds under some container inits), so what
   * cannot go yet is retried in the background; `settled()` waits for that.
   */
  async removeCgroups(containerId: string): Promise<void> {
    if (await this.tryRemoveCgroups(containerId)) return;
    if (this.cgroupJanitor.has(containerId)) return;
    const job = (async () => {
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        if (await this.tryRemoveCgroups(containerId)) return;
      }
      this.o.logger.warn({ containerId }, 'sandbox cgroups still busy after 60 s; reconciliation removes them later');
    })().finally(() => this.cgroupJanitor.delete(containerId));
    this.cgroupJanitor.set(containerId, job);
  }

  /** Resolves when background cgroup removals are done. */
  async settled(): Promise<void> {
    while (this.cgroupJanitor.size) await Promise.all(this.cgroupJanitor.values());
  }

  private async tryRemoveCgroups(containerId: string): Promise<boolean> {
    let done = true;
    for (const c of CGROUP_CONTROLLERS) {
      await rmdir(join(CGROUP_ROOT, c, this.o.names.cgroupParent, containerId)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') done = false;
      });
    }
    return done;
  }

  private paths(dir: string) {
    const layer = new DiskLayer(dir);
    return { layer, upper: layer.upper, work: layer.work, rootfs: join(dir, 'rootfs'), bundle: join(dir, 'bundle'), console: join(dir, 'console.log') };
  }

  private stateFile(id: string) { return join(this.o.stateRoot, `${id}_sandbox:${id}.state`); }

  private globalFlags(): string[] {
    return [`--root=${this.o.stateRoot}`, `--platform=${this.platform}`, '--network=host', '--cpu-num-from-quota'];
  }

  consolePath(ref: InstanceRef): string {
    return this.paths(ref.dir).console;
  }

  consoleTail(ref: InstanceRef, lines = 5): Promise<string> {
    return consoleTailOf(this.paths(ref.dir).console, lines);
  }

  private cmd(ref: InstanceRef, args: string[], opts: { allowFail?: boolean; timeoutMs?: number; inputFile?: string; onOutput?: ExecOutput } = {}): Promise<RunResult> {
    return run('nsenter', [`--net=${ref.netnsPath}`, this.runsc, ...this.globalFlags(), ...args], { timeoutMs: opts.timeoutMs ?? 15_000, allowFail: opts.allowFail, inputFile: opts.inputFile, onOutput: opts.onOutput });
  }

  /**
   * `runsc run --detach` with the container's stdout and stderr going to console.log. The
   * sandbox processes inherit only that file, so they outlive the agent without a pipe to it.
   */
  private async runDetached(spec: InstanceSpec, id: string, paths: ReturnType<GvisorDriver['paths']>): Promise<void> {
    await mkdir(this.o.stateRoot, { recursive: true });
    const argv = [`--net=${spec.netnsPath}`, this.runsc, ...this.globalFlags(), 'run', '--detach', `--bundle=${paths.bundle}`, id];
    // Every boot is marked with its time: what runsc itself writes after it carries none (sandbox-logs.ts).
    const message = existsSync(paths.console) ? 'sandbox booting again from its files' : 'sandbox booting';
    await appendAgentLine(paths.console, message);
    const { code } = await run('nsenter', argv, { logPath: paths.console, timeoutMs: 60_000, allowFail: true });
    if (code !== 0) {
      throw new CommandError(['runsc', 'run', id], { code, stdout: '', stderr: await this.consoleTail(spec, 3) });
    }
  }

  /**
   * What `runsc delete --force` does for a root container (kill the sandbox and gofer, drop
   * the cgroups and state files), without its wait: runsc polls until the killed sandbox is
   * reaped, and the sandbox, orphaned by `run --detach`, is reaped by the host's PID 1, which
   * can take seconds. Dead is dead once the processes are zombies. False: use runsc delete.
   */
  private async killAndForget(id: string): Promise<boolean> {
    const pids = await this.runscPids(id);
    if (!pids) return false;
    for (const c of ['pids', 'memory']) {
      const procs = await readFile(this.cgroupFile(c, id, 'cgroup.procs'), 'utf8').catch(() => '');
      for (const p of procs.split('\n').filter(Boolean).map(Number)) pids.push(p);
    }
    for (const pid of pids) { try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ } }
    const deadline = Date.now() + 3_000;
    while (!(await Promise.all(pids.map(exited))).every(Boolean)) {
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 5));
    }
    await this.removeCgroups(id);
    for (const f of await readdir(this.o.stateRoot).catch(() => [] as string[])) {
      if (f.startsWith(`${id}_sandbox:`)) await rm(join(this.o.stateRoot, f), { force: true });
    }
    return true;
  }

  /** Sandbox and gofer pids from runsc's state file, when they are runsc's (pids get reused). */
  private async runscPids(id: string): Promise<number[] | undefined> {
    const state = await this.statePids(id);
    if (!state) return undefined;
    const pids: number[] = [];
    for (const pid of [state.sandbox, state.gofer]) {
      if (!pid || pid <= 1) continue;
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
      if (cmdline === undefined) continue;
      if (!cmdline.includes('runsc')) return undefined;
      pids.push(pid);
    }
    return pids;
  }

  /** The sandbox (sentry) and gofer pids runsc's state file names; undefined without one. */
  private async statePids(id: string): Promise<{ sandbox?: number; gofer?: number } | undefined> {
    try {
      const state = JSON.parse(await readFile(this.stateFile(id), 'utf8')) as { goferPid?: number; sandbox?: { pid?: number } };
      return { sandbox: state.sandbox?.pid, gofer: state.goferPid };
    } catch {
      return undefined; // no state file (never started, or deleted): nothing of runsc's to find
    }
  }

  /** Without its namespace the control socket is unreachable: kill the processes, then drop the state. */
  private async forceDelete(id: string): Promise<void> {
    for (const pid of (await this.runscPids(id)) ?? []) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
    await run(this.runsc, [`--root=${this.o.stateRoot}`, 'delete', '--force', id], { allowFail: true, timeoutMs: 30_000 });
    for (const f of await readdir(this.o.stateRoot).catch(() => [] as string[])) {
      if (f.startsWith(`${id}_sandbox:`)) await rm(join(this.o.stateRoot, f), { force: true });
    }
  }
}

/** Gone, or a zombie (dead, waiting for whoever reaps it). */
async function exited(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return true;
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
}
