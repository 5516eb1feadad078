import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '@svc/common';
import { formatSandboxLogLine, SandboxLogLines } from '@svc/contracts/sandbox-logs';
import { run, type RunResult } from '../../host/exec.ts';
import { isMountPoint, unmount } from '../../host/mounts.ts';
import type { ExecOptions, InstanceRef, InstanceSpec, InstanceStats, InstanceStatus, PauseResult, RuntimeDriver } from '../driver.ts';
import { DiskLayer } from '../disk-layer.ts';
import { QmpClient } from '../qmp.ts';
import { linkIntoRootfs, writeIntoRootfs } from '../rootfs-files.ts';
import { SANDBOX_SUDO, type RuntimeBundle } from '../runtime-bundle.ts';
import { sandboxLimits } from '../sandbox-limits.ts';
import { execThroughEnvd, type EnvdTarget } from './envd-exec.ts';
import type { GuestBoot } from './guest-assets.ts';
import { ensureGuestNetwork, GUEST_TAP, type GuestNetwork } from './guest-network.ts';

/** Same layer format as gvisor's (disk-layer.ts): a layer captured on one driver boots on the other. */
const LAYER_TAR_FLAGS = ['--numeric-owner', '--xattrs', '--xattrs-include=*', '--xattrs-exclude=trusted.overlay.origin', '--xattrs-exclude=trusted.overlay.impure'];
const QMP_TIMEOUT_MS = 10_000;
/** Writing guest memory to disk: bounded by the guest's size and the disk, not by QEMU's answer time. */
const MIGRATE_TIMEOUT_MS = 300_000;

export interface MicrovmOptions {
  logger: Logger;
  /** 'kvm' where a KVM guest really boots (kvm-probe.ts), else 'tcg' (software emulation). */
  accel: 'kvm' | 'tcg';
  guest: GuestBoot;
  /** The read-only ext4 image of svc's runtime directory (guest-assets.ts ensureRuntimeDisk). */
  runtimeDisk: (bundle: RuntimeBundle) => Promise<string>;
  /** Where the instance's envd answers and with which token: the one way into a guest (envd-exec.ts). */
  envdOf: (instanceId: string) => EnvdTarget | undefined;
  qemuPath?: string;
}

/** What QEMU was started with, kept so that a resume starts the same machine (migration needs it). */
interface LaunchSpec {
  argv: string[];
}

/**
 * QEMU `microvm` sandboxes (docs/runtimes.md, "microvm"). Each sandbox is one QEMU process,
 * daemonized so that it outlives the agent, started in the sandbox's network namespace with a
 * tap device bridged to the namespace's veth end. Disks: the template's ext4 (read-only,
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

  constructor(private readonly o: MicrovmOptions) {
    this.qemu = o.qemuPath ?? 'qemu-system-x86_64';
  }

  async create(spec: InstanceSpec): Promise<void> {
    const paths = this.paths(spec.dir);
    try {
      if (spec.mounts?.length) throw new Error('volumes are not offered by the microvm runtime yet (docs/runtimes.md)');
      await paths.layer.create(sandboxLimits(spec.resources).diskBytes);
      if (spec.layerArchive) await run('tar', ['--extract', `--file=${spec.layerArchive}`, ...LAYER_TAR_FLAGS, '--same-permissions', '--same-owner', '-C', paths.layer.upper], { timeoutMs: 600_000 });
      await this.boot(spec);
    } catch (err) {
      await this.destroy(spec).catch((e) => this.o.logger.warn({ err: e, instanceId: spec.instanceId }, 'rollback after failed create'));
      throw err;
    }
  }

  /** Places svc's files into the writable layer (through a host-side overlay, as gvisor does), then starts QEMU. */
  private async boot(spec: InstanceSpec): Promise<void> {
    if (!spec.rootfs.mountDir) throw new Error('microvm needs the artifact mounted to place files');
    const paths = this.paths(spec.dir);
    await paths.layer.ensureMounted();
    await mkdir(paths.rootfs, { recursive: true });
    await run('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${spec.rootfs.mountDir},upperdir=${paths.layer.upper},workdir=${paths.layer.work}`, paths.rootfs]);
    try {
      for (const [path, content] of Object.entries({ ...spec.files, '/etc/hostname': `${spec.hostname}\n` })) {
        if (!(await writeIntoRootfs(paths.rootfs, path, content))) this.o.logger.warn({ path }, 'image holds a symlink or directory there; file not placed');
      }
      const sudoPath = existsSync(join(paths.rootfs, 'usr/bin/sudo')) ? '/usr/bin/sudo' : '/usr/local/bin/sudo';
      if (!(await linkIntoRootfs(paths.rootfs, sudoPath, SANDBOX_SUDO))) this.o.logger.warn({ path: sudoPath }, 'image holds a symlink or directory there; sudo not placed');
    } finally {
      await unmount(paths.rootfs);
    }
    const bootDir = join(paths.layer.mountDir, 'boot');
    await mkdir(bootDir, { recursive: true, mode: 0o700 });
    await writeFile(join(bootDir, 'hostname'), `${spec.hostname}\n`);
    await writeFile(join(bootDir, 'exec.sh'), bootScript(spec.env, spec.runtime.initArgs), { mode: 0o600 });
    await paths.layer.unmount();
    const held = await run('losetup', ['--associated', paths.layer.image], { allowFail: true });
    if (held.stdout.trim()) throw new Error(`the writable layer of ${spec.instanceId} is still mounted on the host; the guest cannot take it`);

    const net = await ensureGuestNetwork(spec.netnsPath, spec.dir, spec.instanceId);
    const launch: LaunchSpec = { argv: this.qemuArgs(spec, net, await this.o.runtimeDisk(spec.runtime)) };
    await writeFile(paths.launch, JSON.stringify(launch) + '\n', { mode: 0o600 });
    const message = existsSync(paths.console) ? 'sandbox booting again from its files' : `sandbox booting (QEMU microvm, ${this.o.accel})`;
    await appendFile(paths.console, formatSandboxLogLine({ timestamp: new Date().toISOString(), level: 'info', message, fields: { logger: 'node-agent' } }), { mode: 0o600 });
    await this.launch(spec, launch.argv);
  }

  private qemuArgs(spec: InstanceSpec, net: GuestNetwork, runtimeDisk: string): string[] {
    const paths = this.paths(spec.dir);
    const drive = (id: string, file: string, readOnly: boolean) => [
      '-drive', `id=${id},file=${file},format=raw,if=none,cache=writeback${readOnly ? ',readonly=on' : ''}`,
      '-device', `virtio-blk-device,drive=${id},serial=svc-${id}`,
    ];
    // SVC_MICROVM_KERNEL_LOG=1 keeps the guest kernel's boot messages in the sandbox's log (slower boot).
    const quiet = process.env.SVC_MICROVM_KERNEL_LOG === '1' ? [] : ['quiet'];
    const cmdline = ['console=ttyS0', ...quiet, 'panic=-1', 'reboot=t', `svc.ip=${net.cidr}`, `svc.gw=${net.gateway}`];
    return [
      // TCG's translation cache defaults to 1 GiB; 64 MB serves a guest this size and keeps QEMU small.
      '-M', 'microvm,x-option-roms=off,rtc=on', '-accel', this.o.accel === 'tcg' ? 'tcg,tb-size=64' : 'kvm', '-cpu', this.o.accel === 'kvm' ? 'host' : 'max',
      '-smp', String(spec.resources.cpuCount), '-m', String(spec.resources.memoryMB),
      '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
      '-kernel', this.o.guest.kernel, '-initrd', this.o.guest.initrd, '-append', cmdline.join(' '),
      '-chardev', `file,id=console,path=${paths.console},append=on`, '-serial', 'chardev:console',
      ...drive('template', spec.rootfs.imagePath, true),
      ...drive('layer', paths.layer.image, false),
      ...drive('runtime', runtimeDisk, true),
      '-netdev', `tap,id=net0,ifname=${GUEST_TAP},script=no,downscript=no`, '-device', `virtio-net-device,netdev=net0,mac=${net.mac}`,
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
    await this.endQemu(ref);
    const paths = this.paths(ref.dir);
    if (await isMountPoint(paths.rootfs)) await unmount(paths.rootfs);
    await paths.layer.destroy();
    await rm(ref.dir, { recursive: true, force: true });
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
    await ensureGuestNetwork(ref.netnsPath, ref.dir, ref.instanceId);
    await this.launch(ref, launch.argv, `exec:cat ${paths.state}`);
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
    await rm(paths.state, { force: true });
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
    await this.endQemu(ref);
    await rm(this.paths(ref.dir).state, { force: true });
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
  private async residentBytes(ref: InstanceRef): Promise<number> {
    const pid = await this.qemuPid(ref);
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
    return { cpuUsageNs, memUsedBytes: await this.residentBytes(ref), memCacheBytes: 0, diskUsedBytes: image ? image.blocks * 512 : 0 };
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

  async consoleTail(ref: InstanceRef, lines = 5): Promise<string> {
    const text = await readFile(this.paths(ref.dir).console, 'utf8').catch(() => '');
    const entries = new SandboxLogLines();
    return text.replace(/\r/g, '').trim().split('\n').slice(-lines).map((l) => entries.entry(l)?.message ?? l).join(' | ').slice(-2_000);
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
    const target = this.o.envdOf(ref.instanceId);
    if (!target) throw new Error(`instance ${ref.instanceId} has no envd address`);
    return execThroughEnvd(target, argv, opts);
  }

  private paths(dir: string) {
    const layer = new DiskLayer(dir);
    return {
      layer, rootfs: join(dir, 'rootfs'), console: join(dir, 'console.log'), qmp: join(dir, 'qmp.sock'), pid: join(dir, 'qemu.pid'),
      state: join(dir, 'memory.state'), launch: join(dir, 'launch.json'),
    };
  }
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
