import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { release } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '@svc/common';
import { run } from '../../host/exec.ts';
import type { GuestBoot } from './guest-assets.ts';

/**
 * Whether a KVM guest really boots here: some hosts offer a /dev/kvm on which a guest hangs
 * (ARCHITECTURE: PVM-only nested virtualisation). The guest kernel boots once with svc's
 * initramfs and no disks; its init reaching userspace and saying so is the proof. The answer
 * is kept machine-wide per host kernel release and guest kernel.
 */
export async function kvmBootsGuest(logger: Logger, guest: GuestBoot, qemu = 'qemu-system-x86_64', cacheDir = '/var/cache/svc'): Promise<boolean> {
  if (!existsSync('/dev/kvm')) return false;
  // Another QEMU may boot where this one does not (QEMU 7.2 aborts on -cpu host here): the answer is per binary.
  const key = `${release()} ${guest.kernel}${qemu === 'qemu-system-x86_64' ? '' : ` ${qemu}`}`;
  const cacheFile = join(cacheDir, 'microvm-kvm.json');
  const cached = await readFile(cacheFile, 'utf8').then((t) => JSON.parse(t) as { key: string; boots: boolean }, () => { /* no answer kept yet: probed below */ return undefined; });
  if (cached?.key === key) return cached.boots;
  const r = await run(qemu, ['-M', 'microvm', '-accel', 'kvm', '-cpu', 'host', '-m', '128', '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
    '-kernel', guest.kernel, '-initrd', guest.initrd, '-append', 'console=ttyS0 quiet panic=-1', '-serial', 'stdio'], { timeoutMs: 20_000, allowFail: true });
  const boots = r.stdout.includes('svc-init:');
  logger.info({ boots, kernel: release() }, boots ? 'a KVM guest boots here' : 'a KVM guest does not boot here');
  await mkdir(cacheDir, { recursive: true });
  await writeFile(cacheFile, JSON.stringify({ key, boots }) + '\n');
  return boots;
}
