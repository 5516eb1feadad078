import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { SvcError, type Logger } from '@svc/common';
import { run, type RunResult } from '../../host/exec.ts';
import { isMountPoint, unmount } from '../../host/mounts.ts';
import type { ExecOptions, InstanceRef, InstanceSpec, InstanceStats, InstanceStatus, PauseResult, RuntimeDriver } from '../driver.ts';
import { DiskLayer, LAYER_TAR_FLAGS } from '../disk-layer.ts';
import { QmpClient } from '../qmp.ts';
import { placeSandboxFiles } from '../rootfs-files.ts';
import { appendAgentLine, consoleTailOf } from '../console-file.ts';
import { SANDBOX_SUDO, type RuntimeBundle } from '../runtime-bundle.ts';
import { sandboxLimits } from '../sandbox-limits.ts';
import { SUDO_HELPER_ENV } from '../oci-spec.ts';
import { clearEnvdToken, execThroughEnvd } from './envd-exec.ts';
import type { GuestBoot } from './guest-assets.ts';
import { ensureGuestNetwork, GUEST_CIDR, GUEST_GATEWAY, GUEST_MAC, GUEST_TAP } from './guest-network.ts';
import { TemplateSnapshots, templateKey } from './template-snapshots.ts';
import { endVolumeServers, guestVolumes, releaseVolumeBinds, startVolumeServers, volumeBootFile, volumeQemuArgs, type GuestVolume } from './guest-volumes.ts';

const QMP_TIMEOUT_MS = 10_000;
/** Names the machine qemuArgs builds (its devices): a saved guest of another revision is not restored. Change it with them. */
const MACHINE_REVISION = 'microvm-2';
/** Writing guest memory to disk: bounded by the guest's size and the disk, not by QEMU's answer time. */
const MIGRATE_TIMEOUT_MS = 300_000;

export interface MicrovmOptions {
  logger: Logger;
  /** 'kvm' where a KVM guest really boots (kvm-probe.ts), else 'tcg' (software emulation). */
  accel: 'kvm' | 'tcg';
  /**
   * Under TCG the guest's TSC is the host's: its rate in kHz, given to the guest kernel so that
   * it does not measure it (guest-assets.ts hostTscKhz).
   */
  tscKhz?: number;
  guest: GuestBoot;
  /** The read-only ext4 image of svc's runtime directory (guest-assets.ts ensureRuntimeDisk). */
  runtimeDisk: (bundle: RuntimeBundle) => Promise<string>;
  /** The access token a secure sandbox's envd was given: commands go into a guest through envd alone (envd-exec.ts). */
  envdTokenOf: (instanceId: string) => string | undefined;
  /** Where saved template guests live (template-snapshots.ts). */
  templatesDir: string;
  /** A scratch network namespace for booting a template guest, and its removal. */
  scratchNetns: () => Promise<{ path: string; remove: () => Promise<void> }>;
  qemuPath?: string;
}

/** What QEMU was started with, kept so that a resume starts the same machine (migration needs it). */
interface LaunchSpec {
  argv: string[];
  /** The shape QEMU was given (a captured machine restores only with the same). */
  resources?: InstanceSpec['resources'];
  /** Volumes over virtiofs: the guest cannot be saved (memoryPauseBlocked). */
  volumes?: boolean;
}

/** machine.json in a captured machine's archive. */
interface SavedMachine {
  resources?: InstanceSpec['resources'];
  envdToken?: string;
}

/**
 * QEMU `microvm` sandboxes (docs/runtimes.md, "microvm"). Each sandbox is one QEMU process,
 * daemonized so that it outlives the agent, started in the sandbox's network namespace on a
 * tap device there (guest-network.ts: one guest address, translated to the sandbox's). Disks: the template's ext4 (read-only,
 * shared), the sandbox's writable layer (the same ext4 image gvisor uses, mounted by the guest
 * as the overlay's upper) and svc's runtime directory (read-only, shared). Pause writes the
 * machine's state to a file and ends QEMU, so a paused sandbox holds no process and no memory;
 * resume starts QEMU again on that file.
 */
export class MicrovmDriver implements RuntimeDriver {
  readonly kind = 'microvm' as const;
  readonly pauseKinds = ['snapshot' as const, 'filesystem' as const];
  readonly rootfsInput = 'directory' as const;
  private readonly qemu: string;
  readonly templates: TemplateSnapshots;

  constructor(private readonly o: MicrovmOptions) {
    this.qemu = o.qemuPath ?? 'qemu-system-x86_64';
    this.templates = new TemplateSnapshots(o.templatesDir, o.logger);
  }

  /**
   * Restores the template's saved guest when there is one for this template and shape, else
   * boots cold and has the saved guest made in the background for the next create.
   */
  async create(spec: InstanceSpec): Promise<void> {
    const paths = this.paths(spec.dir);
    try {
      if (spec.layerArchive && spec.layerContents === 'memory') {
        await this.restoreMachine(spec, spec.layerArchive);
        return;
      }
      const key = spec.layerArchive || spec.mounts?.length ? undefined : await this.templateKeyOf(spec);
      const saved = key && this.templates.find(key);
      if (saved) {
        await this.restoreTemplate(spec, saved);
        return;
      }
      await paths.layer.create(sandboxLimits(spec.resources).diskBytes);
      if (spec.layerArchive) await run('tar', ['--extract', `--file=${spec.layerArchive}`, ...LAYER_TAR_FLAGS, '--same-permissions', '--same-owner', '-C', paths.layer.upper], { timeoutMs: 600_000 });
      await this.boot(spec);
      if (key) {
        const uses = [spec.rootfs.imagePath, await this.o.runtimeDisk(spec.runtime), this.o.guest.kernel, this.o.guest.initrd];
        this.templates.makeSoon(key, uses, (dir) => this.makeTemplate(spec, dir));
      }
    } catch (err) {
      await this.destroy(spec).catch((e) => this.o.logger.warn({ err: e, instanceId: spec.instanceId }, 'rollback after failed create'));
      throw err;
    }
  }

  private async templateKeyOf(spec: InstanceSpec): Promise<string> {
    const image = await stat(spec.rootfs.imagePath);
    return templateKey(spec, {
      runtimeDisk: await this.o.runtimeDisk(spec.runtime), kernel: this.o.guest.kernel, initrd: this.o.guest.initrd, accel: this.o.accel,
      imageStamp: `${image.size}:${image.mtimeMs}`, bootScript: bootScript(bootEnv(spec), spec.runtime.initArgs), machine: MACHINE_REVISION,
    });
  }

  /**
   * Boots a guest like a create's, in a scratch namespace of its own, waits until its envd
   * listens (its log line on the console: the scratch namespace is not reachable from here)
   * and saves it into `dir`.
   */
  private async makeTemplate(like: InstanceSpec, dir: string): Promise<void> {
    const netns = await this.o.scratchNetns();
    const ref: InstanceRef = { instanceId: `tpl-${randomBytes(4).toString('hex')}`, dir, netnsPath: netns.path };
    try {
      await this.paths(dir).layer.create(sandboxLimits(like.resources).diskBytes);
      await this.boot({ ...like, ...ref, layerArchive: undefined, mounts: undefined });
      const deadline = Date.now() + 180_000;
      while (!/listening on 0\.0\.0\.0:49983/.test(await readFile(this.paths(dir).console, 'utf8').catch(() => ''))) {
        if (!(await this.qemuPid(ref))) throw new Error(`the template guest ended before its envd listened: ${await this.consoleTail(ref, 3)}`);
        if (Date.now() > deadline) throw new Error('the template guest\'s envd did not listen within 180 s');
        await new Promise((r) => setTimeout(r, 100));
      }
      await this.pause(ref);
      await rm(this.paths(dir).launch, { force: true });
    } catch (err) {
      await this.endQemu(ref);
      throw err;
    } finally {
      await netns.remove();
    }
  }

  /** A new sandbox from a saved template guest: a copy of its layer, QEMU on its state, the clock set. */
  private async restoreTemplate(spec: InstanceSpec, saved: string): Promise<void> {
    const paths = this.paths(spec.dir);
    await mkdir(spec.dir, { recursive: true });
    await run('cp', ['--sparse=always', join(saved, 'disk.ext4'), paths.layer.image]);
    await ensureGuestNetwork(spec.netnsPath);
    const launch = await this.writeLaunch(spec, []);
    // The saved guest's boot log is this sandbox's too: the envd now serving it printed it.
    await copyFile(join(saved, 'console.log'), paths.console).catch(() => { /* a saved guest without its log: the restore line below stands alone */ });
    await appendAgentLine(paths.console, `sandbox restored from its template's saved guest (QEMU microvm, ${this.o.accel})`);
    await this.launchFromState(spec, launch.argv, join(saved, 'memory.state'));
  }

  /**
   * Writes a paused instance's machine: its writable layer's image, its saved state, and its
   * shape and envd token (machine.json), which a restore needs (its memory holds the token anyway).
   */
  async captureMachine(ref: InstanceRef, archivePath: string): Promise<void> {
    const paths = this.paths(ref.dir);
    if (!existsSync(paths.state)) throw new Error(`instance ${ref.instanceId} is not paused to a file; its machine cannot be read`);
    const launch = JSON.parse(await readFile(paths.launch, 'utf8')) as LaunchSpec;
    const machine: SavedMachine = { resources: launch.resources, envdToken: this.o.envdTokenOf(ref.instanceId) };
    await writeFile(paths.machine, JSON.stringify(machine) + '\n', { mode: 0o600 });
    try {
      await run('tar', ['--create', `--file=${archivePath}`, '--sparse', '-C', ref.dir, 'disk.ext4', 'memory.state', 'machine.json'], { timeoutMs: 600_000 });
    } finally {
      await rm(paths.machine, { force: true });
    }
  }

  /**
   * A new sandbox that goes on from a captured machine: its disk and memory, its processes. Its
   * envd still holds the old sandbox's token, which is cleared here so that /init gives it the new one.
   */
  private async restoreMachine(spec: InstanceSpec, archive: string): Promise<void> {
    const paths = this.paths(spec.dir);
    await mkdir(spec.dir, { recursive: true });
    await run('tar', ['--extract', `--file=${archive}`, '-C', spec.dir, 'disk.ext4', 'memory.state', 'machine.json'], { timeoutMs: 600_000 });
    const machine = JSON.parse(await readFile(paths.machine, 'utf8')) as SavedMachine;
    await rm(paths.machine, { force: true });
    const want = machine.resources;
    if (want && (want.cpuCount !== spec.resources.cpuCount || want.memoryMB !== spec.resources.memoryMB)) {
      throw new SvcError(409, `this snapshot holds a machine of ${want.cpuCount} CPUs and ${want.memoryMB} MB; it cannot start as ${spec.resources.cpuCount} CPUs and ${spec.resources.memoryMB} MB`);
    }
    await ensureGuestNetwork(spec.netnsPath);
    const launch = await this.writeLaunch(spec, []);
    await appendAgentLine(paths.console, `sandbox restored from a snapshot of a machine (QEMU microvm, ${this.o.accel})`);
    await this.launchFromState(spec, launch.argv, paths.state, machine.envdToken);
    await rm(paths.state, { force: true });
    if (machine.envdToken && spec.address) await clearEnvdToken({ address: spec.address, accessToken: machine.envdToken });
  }

  /** Places svc's files into the writable layer (through a host-side overlay, as gvisor does), then starts QEMU. */
  private async boot(spec: InstanceSpec): Promise<void> {
    if (!spec.rootfs.mountDir) throw new Error('microvm needs the artifact mounted to place files');
    const paths = this.paths(spec.dir);
    await paths.layer.ensureMounted();
    await mkdir(paths.rootfs, { recursive: true });
    await run('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${spec.rootfs.mountDir},upperdir=${paths.layer.upper},workdir=${paths.layer.work}`, paths.rootfs]);
    try {
      await placeSandboxFiles(paths.rootfs, { ...spec.files, '/etc/hostname': `${spec.hostname}\n` }, this.o.logger);
    } finally {
      await unmount(paths.rootfs);
    }
    const bootDir = join(paths.layer.mountDir, 'boot');
    await mkdir(bootDir, { recursive: true, mode: 0o700 });
    await writeFile(join(bootDir, 'hostname'), `${spec.hostname}\n`);
    await writeFile(join(bootDir, 'exec.sh'), bootScript(bootEnv(spec), spec.runtime.initArgs), { mode: 0o600 });
    const volumes = guestVolumes(spec.dir, spec.mounts ?? []);
    if (volumes.length) await writeFile(join(bootDir, 'volumes'), volumeBootFile(volumes));
    else await rm(join(bootDir, 'volumes'), { force: true });
    // Its loop device released too (disk-layer.ts): the guest takes the image for itself.
    await paths.layer.unmount();

    await ensureGuestNetwork(spec.netnsPath);
    await startVolumeServers(spec.dir, volumes);
    const launch = await this.writeLaunch(spec, volumes);
    await appendAgentLine(paths.console, existsSync(paths.console) ? 'sandbox booting again from its files' : `sandbox booting (QEMU microvm, ${this.o.accel})`);
    await this.launch(spec, launch.argv);
  }

  /** QEMU's command line for this instance, kept in launch.json for the resume that must start the same machine. */
  private async writeLaunch(spec: InstanceSpec, volumes: GuestVolume[]): Promise<LaunchSpec> {
    const launch: LaunchSpec = {
      argv: [...this.qemuArgs(spec, await this.o.runtimeDisk(spec.runtime)), ...volumeQemuArgs(volumes, spec.resources.memoryMB)],
      resources: spec.resources, ...(volumes.length ? { volumes: true } : {}),
    };
    await writeFile(this.paths(spec.dir).launch, JSON.stringify(launch) + '\n', { mode: 0o600 });
    return launch;
  }

  private qemuArgs(spec: InstanceSpec, runtimeDisk: string): string[] {
    const paths = this.paths(spec.dir);
    const drive = (id: string, file: string, readOnly: boolean) => [
      '-drive', `id=${id},file=${file},format=raw,if=none,cache=writeback${readOnly ? ',readonly=on' : ''}`,
      '-device', `virtio-blk-device,drive=${id},serial=svc-${id}`,
    ];
    // SVC_MICROVM_KERNEL_LOG=1 keeps the guest kernel's boot messages in the sandbox's log (slower boot).
    const quiet = process.env.SVC_MICROVM_KERNEL_LOG === '1' ? [] : ['quiet'];
    // Under TCG on a busy host the guest's TSC calibration against the PIT fails and the boot
    // hangs (7 of 9 concurrent boots, measured): the rate is given instead.
    const tsc = this.o.accel === 'tcg' && this.o.tscKhz ? [`tsc_early_khz=${this.o.tscKhz}`] : [];
    const cmdline = ['console=ttyS0', ...quiet, ...tsc, 'panic=-1', 'reboot=t', `svc.ip=${GUEST_CIDR}`, `svc.gw=${GUEST_GATEWAY}`];
    return [
      // TCG's translation cache defaults to 1 GiB; 64 MB serves a guest this size and keeps QEMU small.
      '-M', 'microvm,x-option-roms=off,rtc=on', '-accel', this.o.accel === 'tcg' ? 'tcg,tb-size=64' : 'kvm', '-cpu', this.o.accel === 'kvm' ? 'host' : 'max',
      '-smp', String(spec.resources.cpuCount), '-m', String(spec.resources.memoryMB),
      '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
      // Modern virtio-mmio: vhost-user devices (virtiofs) refuse legacy ones.
      '-global', 'virtio-mmio.force-legacy=false',
      '-kernel', this.o.guest.kernel, '-initrd', this.o.guest.initrd, '-append', cmdline.join(' '),
      '-chardev', `file,id=console,path=${paths.console},append=on`, '-serial', 'chardev:console',
      ...drive('template', spec.rootfs.imagePath, true),
      ...drive('layer', paths.layer.image, false),
      ...drive('runtime', runtimeDisk, true),
      '-netdev', `tap,id=net0,ifname=${GUEST_TAP},script=no,downscript=no`, '-device', `virtio-net-device,netdev=net0,mac=${GUEST_MAC}`,
      '-qmp', `unix:${paths.qmp},server=on,wait=off`,
    ];
  }

  /** Starts QEMU detached (it outlives the agent), in the sandbox's namespace. */
  private async launch(ref: InstanceRef, argv: string[], incoming?: string): Promise<void> {
    const paths = this.paths(ref.dir);
    await rm(paths.qmp, { force: true });
    await rm(paths.pid, { force: true });
    const r = await run('nsenter', [`--net=${ref.netnsPath}`, this.qemu, ...argv, ...(incoming ? ['-incoming', incoming] : []), '-daemonize', '-pidfile', paths.pid],
      { timeoutMs: 60_000, allowFail: true });
    if (r.code !== 0) throw new Error(`QEMU did not start (exit ${r.code}): ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ')}`);
  }

  async destroy(ref: InstanceRef): Promise<void> {
    // The read-only binds lead into volumes: down before the directory is removed.
    await this.endProcesses(ref);
    const paths = this.paths(ref.dir);
    if (await isMountPoint(paths.rootfs)) await unmount(paths.rootfs);
    await paths.layer.destroy();
    await rm(ref.dir, { recursive: true, force: true });
  }

  /** Ends QEMU and the volumes' virtiofsd, and takes the read-only binds down. */
  private async endProcesses(ref: InstanceRef): Promise<void> {
    await this.endQemu(ref);
    await endVolumeServers(ref.dir);
    await releaseVolumeBinds(ref.dir);
  }

  /** Kills QEMU (a paused instance has none) and waits until it is gone. */
  private async endQemu(ref: InstanceRef): Promise<void> {
    const pid = await this.qemuPid(ref);
    if (!pid) return;
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
    const deadline = Date.now() + 10_000;
    while (await this.qemuPid(ref) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await rm(this.paths(ref.dir).pid, { force: true });
  }

  /** QEMU's pid while it runs for this instance (the pid file names it; pids get reused). */
  private async qemuPid(ref: InstanceRef): Promise<number | undefined> {
    const paths = this.paths(ref.dir);
    const pid = Number((await readFile(paths.pid, 'utf8').catch(() => '')).trim());
    if (!pid) return undefined;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes(paths.qmp)) return undefined;
    const state = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    return state.slice(state.lastIndexOf(')') + 2).startsWith('Z') ? undefined : pid;
  }

  private async qmp<T>(ref: InstanceRef, fn: (q: QmpClient) => Promise<T>): Promise<T> {
    const q = await QmpClient.connect(this.paths(ref.dir).qmp, { timeoutMs: QMP_TIMEOUT_MS });
    try {
      return await fn(q);
    } finally {
      q.close();
    }
  }

  /**
   * Stops the guest, writes its whole state (memory, devices) to `memory.state` and ends QEMU.
   * A failed save leaves the guest running as it was.
   */
  async pause(ref: InstanceRef): Promise<PauseResult> {
    const paths = this.paths(ref.dir);
    const tmp = `${paths.state}.tmp`;
    await rm(tmp, { force: true });
    await this.qmp(ref, async (q) => {
      await q.execute('stop');
      try {
        await q.execute('migrate', { uri: `exec:cat > ${tmp}` });
        const deadline = Date.now() + MIGRATE_TIMEOUT_MS;
        while (true) {
          const m = await q.execute<{ status?: string; 'error-desc'?: string }>('query-migrate');
          if (m.status === 'completed') break;
          if (m.status === 'failed' || m.status === 'cancelled') throw new Error(`saving the guest failed: ${m['error-desc'] ?? m.status}`);
          if (Date.now() > deadline) { await q.execute('migrate_cancel').catch(() => undefined); throw new Error('saving the guest took too long'); }
          await new Promise((r) => setTimeout(r, 10));
        }
      } catch (err) {
        await q.execute('cont').catch((e: Error) => this.o.logger.error({ instanceId: ref.instanceId, err: e.message }, 'guest could not be continued after a failed save'));
        await rm(tmp, { force: true });
        throw err;
      }
      await q.execute('quit').catch(() => { /* QEMU may close the socket before answering quit */ });
    });
    const deadline = Date.now() + 10_000;
    while (await this.qemuPid(ref)) {
      if (Date.now() > deadline) { await this.endQemu(ref); break; }
      await new Promise((r) => setTimeout(r, 5));
    }
    await rename(tmp, paths.state);
    return { kind: 'snapshot', snapshotBytes: (await stat(paths.state)).size };
  }

  /** Starts QEMU again on the saved state; the guest goes on where it stopped. */
  async resume(ref: InstanceRef): Promise<void> {
    const paths = this.paths(ref.dir);
    if (!existsSync(paths.state)) {
      if (await this.qemuPid(ref)) return; // running already
      throw new Error(`instance ${ref.instanceId} has no saved state to resume from`);
    }
    const launch = JSON.parse(await readFile(paths.launch, 'utf8')) as LaunchSpec;
    await ensureGuestNetwork(ref.netnsPath);
    await this.launchFromState(ref, launch.argv, paths.state);
    await rm(paths.state, { force: true });
  }

  /**
   * QEMU on a saved state until the guest runs, then the guest's clock set to the host's (it
   * stood still while the state was on disk) and its random pool reseeded (guests restored from
   * one template state would draw the same numbers). A guest that does not come back is ended.
   */
  private async launchFromState(ref: InstanceRef, argv: string[], state: string, envdToken?: string): Promise<void> {
    await this.launch(ref, argv, `exec:cat ${state}`);
    try {
      await this.qmp(ref, async (q) => {
        const deadline = Date.now() + MIGRATE_TIMEOUT_MS;
        while (true) {
          const s = await q.execute<{ status: string }>('query-status');
          if (s.status === 'running') return;
          if (s.status === 'paused' || s.status === 'postmigrate') { await q.execute('cont'); return; }
          if (s.status !== 'inmigrate') throw new Error(`the guest did not come back from its saved state (status ${s.status})`);
          if (Date.now() > deadline) throw new Error('loading the guest took too long');
          await new Promise((r) => setTimeout(r, 10));
        }
      });
    } catch (err) {
      await this.endQemu(ref);
      throw err;
    }
    // svc-sudo sets the clock and reseeds the kernel's random pool (packages/node-agent/native/sudo.c).
    const renew = [SANDBOX_SUDO, '--after-restore', String(Date.now()), randomBytes(64).toString('hex')];
    const set = await (envdToken && ref.address ? execThroughEnvd({ address: ref.address, accessToken: envdToken }, renew, { timeoutMs: 10_000 }) : this.exec(ref, renew, { timeoutMs: 10_000 }))
      .catch((err: Error) => ({ code: -1, stdout: '', stderr: err.message }));
    if (set.code !== 0) this.o.logger.warn({ instanceId: ref.instanceId, err: set.stderr.trim() }, 'the guest clock and random pool could not be renewed after a restore');
  }

  /**
   * A filesystem pause: the guest's buffers are flushed (sync through envd) and QEMU ends; the
   * writable layer stays for `reboot`.
   */
  async stop(ref: InstanceRef): Promise<void> {
    if (await this.qemuPid(ref)) {
      const synced = await this.exec(ref, ['/bin/sync'], { timeoutMs: 30_000 }).catch((err: Error) => ({ code: -1, stdout: '', stderr: err.message }));
      if (synced.code !== 0) this.o.logger.warn({ instanceId: ref.instanceId, err: synced.stderr.trim() }, 'sync before stopping the guest failed; its last writes may be lost');
    }
    await this.endProcesses(ref);
    await rm(this.paths(ref.dir).state, { force: true });
  }

  /**
   * A guest with volumes cannot be saved: QEMU 7.2 cannot migrate a vhost-user-fs device. Its
   * pause is a filesystem pause (the service asks this first).
   */
  async memoryPauseBlocked(ref: InstanceRef): Promise<string | undefined> {
    const launch = await readFile(this.paths(ref.dir).launch, 'utf8').then((t) => JSON.parse(t) as LaunchSpec, () => undefined);
    return launch?.volumes ? 'a microvm sandbox with volumes cannot be saved with its memory (QEMU 7.2 cannot migrate virtiofs)' : undefined;
  }

  async reboot(spec: InstanceSpec): Promise<void> {
    if (!existsSync(this.paths(spec.dir).layer.image)) throw new Error(`the writable layer of ${spec.instanceId} is gone; it cannot be booted again`);
    try {
      await this.boot(spec);
    } catch (err) {
      await this.stop(spec).catch((e) => this.o.logger.warn({ err: e, instanceId: spec.instanceId }, 'stop after a failed reboot'));
      throw err;
    }
  }

  async keptLayer(ref: InstanceRef): Promise<boolean> {
    return existsSync(this.paths(ref.dir).layer.image);
  }

  async status(ref: InstanceRef): Promise<InstanceStatus> {
    const paths = this.paths(ref.dir);
    if (await this.qemuPid(ref)) {
      const s = await this.qmp(ref, (q) => q.execute<{ status: string }>('query-status')).catch(() => undefined);
      return s?.status === 'paused' ? 'paused' : 'running';
    }
    if (existsSync(paths.state)) return 'paused';
    return existsSync(paths.layer.image) ? 'stopped' : 'missing';
  }

  async processesAlive(ref: InstanceRef): Promise<boolean> {
    return !!(await this.qemuPid(ref));
  }

  /**
   * QEMU's resident memory: the guest's RAM in use plus QEMU's own. Not offered as
   * memoryUsedBytes: the guest kernel has its own OOM killer, which ends one process.
   */
  private async residentBytes(pid: number | undefined): Promise<number> {
    if (!pid) return 0;
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
  }

  async stats(ref: InstanceRef): Promise<InstanceStats> {
    const pid = await this.qemuPid(ref);
    let cpuUsageNs = 0;
    if (pid) {
      const s = await readFile(`/proc/${pid}/stat`, 'utf8');
      const fields = s.slice(s.lastIndexOf(')') + 2).split(' ');
      // utime and stime (fields 14 and 15) in clock ticks of 1/100 s.
      cpuUsageNs = (Number(fields[11]) + Number(fields[12])) * 10_000_000;
    }
    const image = await stat(this.paths(ref.dir).layer.image).catch(() => undefined);
    return { cpuUsageNs, memUsedBytes: await this.residentBytes(pid), memCacheBytes: 0, diskUsedBytes: image ? image.blocks * 512 : 0 };
  }

  async sweep(keep: Set<string>, dirOf: (instanceId: string) => string, netnsOf: (instanceId: string) => string): Promise<void> {
    const root = join(dirOf('x'), '..');
    for (const instanceId of await readdir(root).catch(() => [] as string[])) {
      if (keep.has(instanceId)) continue;
      const dir = dirOf(instanceId);
      if (existsSync(this.paths(dir).launch) || existsSync(this.paths(dir).layer.image)) {
        await this.destroy({ instanceId, dir, netnsPath: netnsOf(instanceId) });
      }
    }
  }

  consolePath(ref: InstanceRef): string {
    return this.paths(ref.dir).console;
  }

  consoleTail(ref: InstanceRef, lines = 5): Promise<string> {
    return consoleTailOf(this.paths(ref.dir).console, lines);
  }

  /** Reads the layer with the guest stopped (the caller paused it: QEMU has ended). */
  async captureLayer(ref: InstanceRef, archivePath: string): Promise<void> {
    const paths = this.paths(ref.dir);
    if (await this.qemuPid(ref)) throw new Error('the guest still runs; pause it before reading its layer');
    await mkdir(paths.layer.mountDir, { recursive: true });
    await run('mount', ['-t', 'ext4', '-o', 'loop,ro,noload', paths.layer.image, paths.layer.mountDir]);
    try {
      await run('tar', ['--create', `--file=${archivePath}`, ...LAYER_TAR_FLAGS, '--sparse', '-C', paths.layer.upper, '.'], { timeoutMs: 600_000 });
    } finally {
      await unmount(paths.layer.mountDir);
    }
  }

  async exec(ref: InstanceRef, argv: string[], opts: ExecOptions = {}): Promise<RunResult> {
    if (!ref.address) throw new Error(`instance ${ref.instanceId} has no address to reach its envd at`);
    return execThroughEnvd({ address: ref.address, accessToken: this.o.envdTokenOf(ref.instanceId) }, argv, opts);
  }

  /** Resolves when no template guest is being made. */
  async settled(): Promise<void> {
    await this.templates.settled();
  }

  private paths(dir: string) {
    const layer = new DiskLayer(dir);
    return {
      layer, rootfs: join(dir, 'rootfs'), console: join(dir, 'console.log'), qmp: join(dir, 'qmp.sock'), pid: join(dir, 'qemu.pid'),
      state: join(dir, 'memory.state'), launch: join(dir, 'launch.json'), machine: join(dir, 'machine.json'),
    };
  }
}

/**
 * PID 1's environment: gvisor's (oci-spec.ts) without what only gVisor needs (the memory
 * guard, the spawner). sudo still goes through envd, since /usr/bin/sudo is svc's here too.
 */
function bootEnv(spec: InstanceSpec): Record<string, string> {
  return { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...spec.env, [SUDO_HELPER_ENV]: SANDBOX_SUDO };
}

/**
 * The guest init's last step (packages/node-agent/guest/init.sh): replaces the environment with
 * the sandbox's and hands PID 1 to its init. Names were checked by the caller; values are quoted.
 */
export function bootScript(env: Record<string, string>, initArgs: string[]): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const vars = Object.entries(env).filter(([k]) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(k)).map(([k, v]) => q(`${k}=${v}`));
  return `exec /bin/busybox env -i ${vars.join(' ')} /bin/busybox switch_root /newroot ${initArgs.map(q).join(' ')}\n`;
}
