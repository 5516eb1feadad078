import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '@svc/common';
import { missingTools } from '../host/host-facts.ts';
import { chooseGvisorPlatform } from './gvisor-platform.ts';
import { ensureGuestBoot } from './microvm/guest-assets.ts';
import { kvmBootsGuest } from './microvm/kvm-probe.ts';

export interface HostProbes {
  /** The gVisor platform a node agent will take here (kvm or ptrace); undefined without runsc. */
  gvisorPlatform?: string;
  /** Whether a KVM guest boots here; undefined without /dev/kvm, QEMU or a guest kernel. */
  kvmBootsGuest?: boolean;
}

/**
 * Asks this machine the questions a node agent's runtime choice asks at its first start (which
 * gVisor platform, whether a KVM guest boots), so that their answers, kept machine-wide in
 * /var/cache/svc, are there before it: `svc prepare` runs this while set-up compiles (docs/
 * quickstart.md). Each probe is skipped where its tools are missing, as the node agent would.
 */
export async function probeHost(o: { logger: Logger; guestKernelDir: string }): Promise<HostProbes> {
  const out: HostProbes = {};
  const gvisor = missingTools(['runsc']).length === 0 ? chooseGvisorPlatform(o.logger) : Promise.resolve(undefined);
  const kvm = (async () => {
    if (!existsSync('/dev/kvm') || missingTools(['qemu-system-x86_64']).length > 0 || !existsSync(join(o.guestKernelDir, 'vmlinuz'))) return undefined;
    // The probe guest's initramfs is made in a scratch directory: no data directory exists yet.
    const scratch = await mkdtemp(join(tmpdir(), 'svc-probe-'));
    try {
      return await kvmBootsGuest(o.logger, await ensureGuestBoot(scratch, o.guestKernelDir));
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  })();
  const [platform, boots] = await Promise.all([gvisor, kvm]);
  if (platform !== undefined) out.gvisorPlatform = platform;
  if (boots !== undefined) out.kvmBootsGuest = boots;
  return out;
}
