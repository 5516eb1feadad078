import { existsSync } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { run, type RunResult } from '../../host/exec.ts';
import { isMountPoint, unmount } from '../../host/mounts.ts';
import type { ExecOptions, InstanceRef, InstanceSpec, InstanceStats, InstanceStatus, PauseResult, RuntimeDriver } from '../driver.ts';
import { createCappedTar } from '../capped-tar.ts';
import { assertLayerDirs, LAYER_MOUNT_OPTIONS, LAYER_TAR_FLAGS, RESTORE_FILES } from '../disk-layer.ts';
import { placeSandboxFiles } from '../rootfs-files.ts';
import { appendAgentLine, consoleTailOf } from '../console-file.ts';
import { sandboxLimits } from '../sandbox-limits.ts';
import { execThroughEnvd } from './envd-exec.ts';
import { ensureGuestNetwork } from './guest-network.ts';
import { TemplateSnapshots } from './template-snapshots.ts';
import { endVolumeServers, guestVolumes, releaseVolumeBinds, startVolumeServers } from './guest-volumes.ts';
import { microvmPaths } from './instance-files.ts';
import { MachineState } from './machine-state.ts';
import { TEMPLATE_MEMORY_FILE, type GuestMemory } from './template-memory.ts';
import { TemplateGuests, type TemplateGuestOptions } from './template-guests.ts';
import { writeBootFiles, writeLaunch, type LaunchSpec } from './qemu-command.ts';
import { cpuUsageNs, endQemu, qemuPid, residentBytes, startQemu, withQmp } from './qemu-process.ts';

export interface MicrovmOptions extends TemplateGuestOptions {
  /** The access token a secure sandbox's envd was given: commands go into a guest through envd alone (envd-exec.ts). */
  envdTokenOf: (instanceId: string) => string | undefined;
  /** Where saved template guests live (template-snapshots.ts). */
  templatesDir: string;
  /** The QEMU binary (node_agent.qemu_binary). */
  qemuPath: string;
}

/**
 * QEMU `microvm` sandboxes (docs/runtimes.md, "microvm"). Each sandbox is one QEMU process,
 * daemonized so that it outlives the agent, started in the sandbox's network namespace on a
 * tap device there (guest-network.ts: one guest address, translated to the sandbox's). Disks: the template's ext4 (read-only,
 * shared), the sandbox's writable layer (the same ext4 image gvisor uses, mounted by the guest
 * as the overlay's upper) and svc's runtime directory (read-only, shared). Pause writes the
 * machine's state to a file and ends QEMU, so a paused sandbox holds no process and no memory;
 * resume starts QEMU again on that file (machine-state.ts). Creates restore a clone of the
 * template's saved guest where there is one (template-guests.ts makes and finds them), and the
 * warm pool holds clones parked before that restore. QEMU's command line is qemu-command.ts;
 * its process, qemu-process.ts.
 */
export class MicrovmDriver implements RuntimeDriver {
  readonly kind = 'microvm' as const;
  readonly pauseKinds = ['snapshot' as const, 'filesystem' as const];
  readonly rootfsInput = 'directory' as const;
  private readonly qemu: string;
  readonly templates: TemplateSnapshots;
  private readonly machines: MachineState;
  private readonly guests: TemplateGuests;
  /**
   * Parked clones' device state, by instance id. Only this process's: an agent that restarts
   * tears warm instances down (reconcile.ts), parked ones with them.
   */
  private readonly parked = new Map<string, string>();

  constructor(private readonly o: MicrovmOptions) {
    this.qemu = o.qemuPath;
    this.templates = new TemplateSnapshots(o.templatesDir, o.logger);
    this.machines = new MachineState({ ...o, qemu: this.qemu, runtimeDisk: (spec) => o.runtimeDisk(spec.runtime) });
    this.guests = new TemplateGuests(o, this.templates, { machines: this.machines, boot: (spec, memory) => this.boot(spec, memory) });
  }

  /**
   * Restores the template's saved guest when there is one for this template and shape, else
   * boots cold and has the saved guest made in the background for the next create. A warm
   * (`background`) instance is a parked clone instead: QEMU waiting on the template's memory
   * file, the saved guest made first when there is none (parkClone).
   */
  async create(spec: InstanceSpec): Promise<void | 'parked'> {
    const paths = microvmPaths(spec.dir);
    try {
      if (spec.layerArchive && spec.layerContents === 'memory') {
        await this.machines.restore(spec, spec.layerArchive);
        return;
      }
      const key = spec.layerArchive || spec.mounts?.length ? undefined : await this.guests.keyOf(spec);
      const saved = key && await this.guests.find(key, spec.background ? spec : undefined);
      if (saved && spec.background) {
        await this.parkClone(spec, saved);
        return 'parked';
      }
      if (saved) {
        await this.restoreTemplate(spec, saved);
        return;
      }
      await paths.layer.create(sandboxLimits(spec.resources).diskBytes);
      if (spec.layerArchive) await run('tar', ['--extract', `--file=${spec.layerArchive}`, ...LAYER_TAR_FLAGS, '--same-permissions', '--same-owner', '-C', paths.layer.upper], { timeoutMs: 600_000, what: RESTORE_FILES });
      await this.boot(spec);
      if (key) await this.guests.makeSoon(key, spec);
    } catch (err) {
      await this.destroy(spec).catch((e) => this.o.logger.warn({ err: e, instanceId: spec.instanceId }, 'rollback after failed create'));
      throw err;
    }
  }

  /**
   * A new sandbox from a saved template guest: a copy of its layer, QEMU mapping the template's
   * memory file copy-on-write and reading its device state only, the clock set.
   */
  private async restoreTemplate(spec: InstanceSpec, saved: string): Promise<void> {
    const argv = await this.prepareClone(spec, saved, 'sandbox restored from its template\'s saved guest');
    await this.machines.startFrom(spec, argv, join(saved, 'memory.state'), { ignoreShared: true });
  }

  /**
   * A warm clone: everything restoreTemplate does but reading the device state, which unpark
   * does at the hand-out. Its QEMU holds no guest page meanwhile (machine-state.ts startWaiting).
   */
  private async parkClone(spec: InstanceSpec, saved: string): Promise<void> {
    const argv = await this.prepareClone(spec, saved, 'warm sandbox waiting on its template\'s saved guest');
    this.parked.set(spec.instanceId, join(saved, 'memory.state'));
    await this.machines.startWaiting(spec, argv);
  }

  async unpark(ref: InstanceRef): Promise<void> {
    const state = this.parked.get(ref.instanceId);
    if (!state) throw new Error(`instance ${ref.instanceId} is not a parked clone of this agent's`);
    this.parked.delete(ref.instanceId);
    await appendAgentLine(microvmPaths(ref.dir).console, 'warm sandbox handed out: its device state read, the guest runs');
    await this.machines.continueFrom(ref, state, { waiting: true });
  }

  /** A clone's layer (a copy of the saved guest's), network and launch; the saved guest's boot log is its console's start. */
  private async prepareClone(spec: InstanceSpec, saved: string, line: string): Promise<string[]> {
    const paths = microvmPaths(spec.dir);
    await mkdir(spec.dir, { recursive: true });
    await run('cp', ['--sparse=always', join(saved, 'disk.ext4'), paths.layer.image], { what: 'copying the template\'s saved guest' });
    await ensureGuestNetwork(spec.netnsPath);
    const memory = { kind: 'template-file' as const, path: join(saved, TEMPLATE_MEMORY_FILE), share: false, readOnly: this.o.qemu.fileRomOption };
    const launch = await writeLaunch(this.o, spec, await this.o.runtimeDisk(spec.runtime), [], memory);
    // The envd now serving it printed that log.
    await copyFile(join(saved, 'console.log'), paths.console).catch(() => { /* a saved guest without its log: the line below stands alone */ });
    await appendAgentLine(paths.console, `${line} (QEMU microvm, ${this.o.accel})`);
    return launch.argv;
  }

  captureMachine(ref: InstanceRef, archivePath: string, maxBytes: number): Promise<void> {
    return this.machines.capture(ref, archivePath, maxBytes);
  }

  /** Places svc's files into the writable layer (through a host-side overlay, as gvisor does), then starts QEMU. */
  private async boot(spec: InstanceSpec, memory?: GuestMemory): Promise<void> {
    if (!spec.rootfs.mountDir) throw new Error('microvm needs the artifact mounted to place files');
    const paths = microvmPaths(spec.dir);
    await paths.layer.ensureMounted();
    assertLayerDirs(paths.layer);
    await mkdir(paths.rootfs, { recursive: true });
    await run('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${spec.rootfs.mountDir},upperdir=${paths.layer.upper},workdir=${paths.layer.work}`, paths.rootfs]);
    try {
      await placeSandboxFiles(paths.rootfs, { ...spec.files, '/etc/hostname': `${spec.hostname}\n` }, this.o.logger);
    } finally {
      await unmount(paths.rootfs);
    }
    const volumes = guestVolumes(spec.dir, spec.mounts ?? []);
    await writeBootFiles(spec, join(paths.layer.mountDir, 'boot'), volumes);
    // Its loop device released too (disk-layer.ts): the guest takes the image for itself.
    await paths.layer.unmount();

    await ensureGuestNetwork(spec.netnsPath);
    await startVolumeServers(spec.dir, volumes);
    const launch = await writeLaunch(this.o, spec, await this.o.runtimeDisk(spec.runtime), volumes, memory);
    await appendAgentLine(paths.console, existsSync(paths.console) ? 'sandbox booting again from its files' : `sandbox booting (QEMU microvm, ${this.o.accel})`);
    await startQemu(this.qemu, spec, launch.argv);
  }

  async destroy(ref: InstanceRef): Promise<void> {
    this.parked.delete(ref.instanceId);
    // The read-only binds lead into volumes: down before the directory is removed.
    await this.endProcesses(ref);
    const paths = microvmPaths(ref.dir);
    if (await isMountPoint(paths.rootfs)) await unmount(paths.rootfs);
    await paths.layer.destroy();
    await rm(ref.dir, { recursive: true, force: true });
  }

  /** Ends QEMU and the volumes' virtiofsd, and takes the read-only binds down. */
  private async endProcesses(ref: InstanceRef): Promise<void> {
    await endQemu(ref);
    await endVolumeServers(ref.dir);
    await releaseVolumeBinds(ref.dir);
  }

  /** Saves the guest's whole state to a file and ends QEMU (machine-state.ts). */
  pause(ref: InstanceRef): Promise<PauseResult> {
    return this.machines.save(ref);
  }

  resume(ref: InstanceRef): Promise<void> {
    return this.machines.resume(ref);
  }

  /**
   * A filesystem pause: the guest's buffers are flushed (sync through envd) and QEMU ends; the
   * writable layer stays for `reboot`.
   */
  async stop(ref: InstanceRef): Promise<void> {
    if (await qemuPid(ref)) {
      const synced = await this.exec(ref, ['/bin/sync'], { timeoutMs: 30_000 }).catch((err: Error) => ({ code: -1, stdout: '', stderr: err.message }));
      if (synced.code !== 0) this.o.logger.warn({ instanceId: ref.instanceId, err: synced.stderr.trim() }, 'sync before stopping the guest failed; its last writes may be lost');
    }
    await this.endProcesses(ref);
    await rm(microvmPaths(ref.dir).state, { force: true });
  }

  /**
   * A guest with volumes cannot be saved: QEMU 7.2 cannot migrate a vhost-user-fs device. Its
   * pause is a filesystem pause (the service asks this first).
   */
  async memoryPauseBlocked(ref: InstanceRef): Promise<string | undefined> {
    const text = await readFile(microvmPaths(ref.dir).launch, 'utf8').catch((err: Error) => {
      // Not started from a launch.json: nothing known stops a save (the save itself says what is wrong).
      this.o.logger.warn({ instanceId: ref.instanceId, err: err.message }, 'launch.json unreadable; the pause is tried with memory');
      return undefined;
    });
    const launch = text === undefined ? undefined : JSON.parse(text) as LaunchSpec;
    return launch?.volumes ? 'a microvm sandbox with volumes cannot be saved with its memory (QEMU 7.2 cannot migrate virtiofs)' : undefined;
  }

  async reboot(spec: InstanceSpec): Promise<void> {
    if (!existsSync(microvmPaths(spec.dir).layer.image)) throw new Error(`the writable layer of ${spec.instanceId} is gone; it cannot be booted again`);
    try {
      await this.boot(spec);
    } catch (err) {
      await this.stop(spec).catch((e) => this.o.logger.warn({ err: e, instanceId: spec.instanceId }, 'stop after a failed reboot'));
      throw err;
    }
  }

  async keptLayer(ref: InstanceRef): Promise<boolean> {
    return existsSync(microvmPaths(ref.dir).layer.image);
  }

  async status(ref: InstanceRef): Promise<InstanceStatus> {
    const paths = microvmPaths(ref.dir);
    if (await qemuPid(ref)) {
      const s = await withQmp(ref, (q) => q.execute<{ status: string }>('query-status')).catch((err: Error) => {
        // QEMU runs: a QMP socket that does not answer (busy saving, or ending) leaves it running.
        this.o.logger.warn({ instanceId: ref.instanceId, err: err.message }, 'QMP query-status failed; the guest is taken as running');
        return undefined;
      });
      return s?.status === 'paused' ? 'paused' : 'running';
    }
    if (existsSync(paths.state)) return 'paused';
    return existsSync(paths.layer.image) ? 'stopped' : 'missing';
  }

  async processesAlive(ref: InstanceRef): Promise<boolean> {
    return !!(await qemuPid(ref));
  }

  async stats(ref: InstanceRef): Promise<InstanceStats> {
    const pid = await qemuPid(ref);
    const image = await stat(microvmPaths(ref.dir).layer.image).catch(() => { /* no writable layer (destroyed, or not made yet): no disk used */ return undefined; });
    return { cpuUsageNs: pid ? await cpuUsageNs(pid) : 0, memUsedBytes: await residentBytes(pid), memCacheBytes: 0, diskUsedBytes: image ? image.blocks * 512 : 0 };
  }

  async sweep(keep: Set<string>, dirOf: (instanceId: string) => string, netnsOf: (instanceId: string) => string): Promise<void> {
    const root = join(dirOf('x'), '..');
    for (const instanceId of await readdir(root).catch(() => { /* no instances directory yet: nothing to sweep */ return [] as string[]; })) {
      if (keep.has(instanceId)) continue;
      const dir = dirOf(instanceId);
      if (existsSync(microvmPaths(dir).launch) || existsSync(microvmPaths(dir).layer.image)) {
        await this.destroy({ instanceId, dir, netnsPath: netnsOf(instanceId) });
      }
    }
  }

  consolePath(ref: InstanceRef): string {
    return microvmPaths(ref.dir).console;
  }

  consoleTail(ref: InstanceRef, lines = 5): Promise<string> {
    return consoleTailOf(microvmPaths(ref.dir).console, lines);
  }

  /** Reads the layer with the guest stopped (the caller paused it: QEMU has ended). */
  async captureLayer(ref: InstanceRef, archivePath: string, maxBytes: number): Promise<void> {
    const paths = microvmPaths(ref.dir);
    if (await qemuPid(ref)) throw new Error('the guest still runs; pause it before reading its layer');
    await mkdir(paths.layer.mountDir, { recursive: true });
    await run('mount', ['-t', 'ext4', '-o', `${LAYER_MOUNT_OPTIONS},ro,noload`, paths.layer.image, paths.layer.mountDir]);
    try {
      assertLayerDirs(paths.layer);
      // The guest wrote this filesystem: what its files claim to hold is capped (capped-tar.ts).
      await createCappedTar(archivePath, [...LAYER_TAR_FLAGS, '--sparse', '-C', paths.layer.upper, '.'], { maxBytes, what: 'capturing the sandbox\'s files' });
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
}
