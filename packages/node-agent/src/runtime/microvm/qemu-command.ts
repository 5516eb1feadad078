import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { InstanceSpec } from '../driver.ts';
import { SUDO_HELPER_ENV } from '../oci-spec.ts';
import { SANDBOX_SUDO } from '../runtime-bundle.ts';
import type { GuestBoot } from './guest-assets.ts';
import { GUEST_CIDR, GUEST_GATEWAY, GUEST_MAC, GUEST_TAP } from './guest-network.ts';
import { volumeBootFile, volumeQemuArgs, type GuestVolume } from './guest-volumes.ts';
import { microvmPaths } from './instance-files.ts';
import { memoryArgs, type GuestMemory } from './template-memory.ts';

/**
 * Names the machine qemuArgs builds (its devices) and what a saved guest holds: one of another
 * revision is not restored. Change it with them (microvm-4: the template guest ran envd's warm-up).
 */
export const MACHINE_REVISION = 'microvm-4';

/** The machine every guest of this node is: how QEMU runs it and what it boots. */
export interface MachineOptions {
  /** 'kvm' where a KVM guest really boots (kvm-probe.ts), else 'tcg' (software emulation). */
  accel: 'kvm' | 'tcg';
  /**
   * Under TCG the guest's TSC is the host's: its rate in kHz, given to the guest kernel so that
   * it does not measure it (guest-assets.ts hostTscKhz).
   */
  tscKhz?: number;
  guest: GuestBoot;
}

/** What QEMU was started with, kept so that a resume starts the same machine (migration needs it). */
export interface LaunchSpec {
  argv: string[];
  /** The shape QEMU was given (a captured machine restores only with the same). */
  resources?: InstanceSpec['resources'];
  /** Volumes over virtiofs: the guest cannot be saved (memoryPauseBlocked). */
  volumes?: boolean;
  /** The RAM is the named backend of template-memory.ts (a template guest or a clone): a saved state of it loads only into the same. */
  memoryBackend?: boolean;
}

/** QEMU's command line for this instance, kept in launch.json for the resume that must start the same machine. */
export async function writeLaunch(m: MachineOptions, spec: InstanceSpec, runtimeDisk: string, volumes: GuestVolume[], memory?: GuestMemory): Promise<LaunchSpec> {
  // Volumes bring their own shared memory backend (vhost-user needs it); they never go with a template's memory.
  if (memory && volumes.length) throw new Error('a guest with volumes cannot map a template\'s memory');
  const launch: LaunchSpec = {
    argv: [...qemuArgs(m, spec, runtimeDisk), ...volumeQemuArgs(volumes, spec.resources.memoryMB), ...memoryArgs(memory, spec.resources.memoryMB)],
    resources: spec.resources, ...(volumes.length ? { volumes: true } : {}), ...(memory ? { memoryBackend: true } : {}),
  };
  await saveLaunch(spec.dir, launch);
  return launch;
}

/** Writes launch.json (a pause rewrites a clone's to its own memory: template-memory.ts withOwnMemory). */
export async function saveLaunch(dir: string, launch: LaunchSpec): Promise<void> {
  await writeFile(microvmPaths(dir).launch, JSON.stringify(launch) + '\n', { mode: 0o600 });
}

/** The command line the instance was last started with (launch.json); a missing or torn file throws. */
export async function readLaunch(dir: string): Promise<LaunchSpec> {
  return JSON.parse(await readFile(microvmPaths(dir).launch, 'utf8')) as LaunchSpec;
}

function qemuArgs(m: MachineOptions, spec: InstanceSpec, runtimeDisk: string): string[] {
  const paths = microvmPaths(spec.dir);
  const drive = (id: string, file: string, readOnly: boolean) => [
    '-drive', `id=${id},file=${file},format=raw,if=none,cache=writeback${readOnly ? ',readonly=on' : ''}`,
    '-device', `virtio-blk-device,drive=${id},serial=svc-${id}`,
  ];
  // SVC_MICROVM_KERNEL_LOG=1 keeps the guest kernel's boot messages in the sandbox's log (slower boot).
  const quiet = process.env.SVC_MICROVM_KERNEL_LOG === '1' ? [] : ['quiet'];
  // Under TCG on a busy host the guest's TSC calibration against the PIT fails and the boot
  // hangs (7 of 9 concurrent boots, measured): the rate is given instead.
  const tsc = m.accel === 'tcg' && m.tscKhz ? [`tsc_early_khz=${m.tscKhz}`] : [];
  const cmdline = ['console=ttyS0', ...quiet, ...tsc, 'panic=-1', 'reboot=t', `svc.ip=${GUEST_CIDR}`, `svc.gw=${GUEST_GATEWAY}`];
  return [
    // TCG's translation cache defaults to 1 GiB; 64 MB serves a guest this size and keeps QEMU small.
    '-M', 'microvm,x-option-roms=off,rtc=on', '-accel', m.accel === 'tcg' ? 'tcg,tb-size=64' : 'kvm', '-cpu', m.accel === 'kvm' ? 'host' : 'max',
    '-smp', String(spec.resources.cpuCount), '-m', String(spec.resources.memoryMB),
    '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
    // Modern virtio-mmio: vhost-user devices (virtiofs) refuse legacy ones.
    '-global', 'virtio-mmio.force-legacy=false',
    '-kernel', m.guest.kernel, '-initrd', m.guest.initrd, '-append', cmdline.join(' '),
    '-chardev', `file,id=console,path=${paths.console},append=on`, '-serial', 'chardev:console',
    ...drive('template', spec.rootfs.imagePath, true),
    ...drive('layer', paths.layer.image, false),
    ...drive('runtime', runtimeDisk, true),
    '-netdev', `tap,id=net0,ifname=${GUEST_TAP},script=no,downscript=no`, '-device', `virtio-net-device,netdev=net0,mac=${GUEST_MAC}`,
    '-qmp', `unix:${paths.qmp},server=on,wait=off`,
  ];
}

/** What the guest's init reads from the layer's boot directory (packages/node-agent/guest/init.sh). */
export async function writeBootFiles(spec: InstanceSpec, bootDir: string, volumes: GuestVolume[]): Promise<void> {
  // Made afresh each boot: the guest writes this directory too (disk-layer.ts LAYER_MOUNT_OPTIONS),
  // so nothing it left there is written through.
  await rm(bootDir, { recursive: true, force: true });
  await mkdir(bootDir, { mode: 0o700 });
  await writeFile(join(bootDir, 'hostname'), `${spec.hostname}\n`, { flag: 'wx' });
  await writeFile(join(bootDir, 'exec.sh'), bootScript(bootEnv(spec), spec.runtime.initArgs), { mode: 0o600, flag: 'wx' });
  if (volumes.length) await writeFile(join(bootDir, 'volumes'), volumeBootFile(volumes), { flag: 'wx' });
}

/** envd starts its after-restore helper (packages/envd/src/system/after-restore.ts); a microvm guest may be restored. */
const AFTER_RESTORE_ENV = 'SVC_ENVD_AFTER_RESTORE';

/**
 * PID 1's environment: gvisor's (oci-spec.ts) without what only gVisor needs (the memory
 * guard, the spawner). sudo still goes through envd, since /usr/bin/sudo is svc's here too.
 */
export function bootEnv(spec: InstanceSpec): Record<string, string> {
  return { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...spec.env, [SUDO_HELPER_ENV]: SANDBOX_SUDO, [AFTER_RESTORE_ENV]: '1' };
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
