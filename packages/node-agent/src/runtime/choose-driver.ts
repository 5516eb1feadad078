import { join } from 'node:path';
import { SvcError, type Logger } from '@svc/common';
import { ResourceNames } from '../names.ts';
import { netnsPath } from '../network/netns.ts';
import { run } from '../host/exec.ts';
import type { RuntimeDriver } from './driver.ts';
import { GvisorDriver } from './gvisor.ts';
import { chooseGvisorPlatform } from './gvisor-platform.ts';
import { ensureGuestBoot, ensureRuntimeDisk, hostTscKhz } from './microvm/guest-assets.ts';
import { kvmBootsGuest } from './microvm/kvm-probe.ts';
import { MicrovmDriver } from './microvm/microvm.ts';
import { missingTools } from '../host/host-facts.ts';

export interface DriverChoice {
  driver: RuntimeDriver;
  /** What runs the sandboxes, for the log: ptrace/kvm (gvisor) or tcg/kvm (microvm). */
  platform: string;
}

export interface DriverChoiceOptions {
  runtime: 'auto' | 'gvisor' | 'microvm';
  guestKernelDir: string;
  stateDir: string;
  names: ResourceNames;
  logger: Logger;
  runscPath?: string;
  envdTokenOf: (instanceId: string) => string | undefined;
}

/**
 * `node_agent.runtime`: gvisor, microvm (KVM where a guest really boots, else TCG, which is
 * for tests: slow), or auto, which takes microvm only where KVM boots a guest (docs/runtimes.md).
 */
export async function chooseDriver(o: DriverChoiceOptions): Promise<DriverChoice> {
  if (o.runtime !== 'gvisor') {
    const microvm = await microvmDriver(o).catch((err: Error) => {
      if (o.runtime === 'microvm') throw err;
      o.logger.info({ reason: err.message }, 'runtime auto: microvm not available here');
      return undefined;
    });
    if (microvm && (o.runtime === 'microvm' || microvm.platform === 'kvm')) {
      if (microvm.platform === 'tcg') o.logger.warn('microvm runs under TCG (software emulation, no KVM here): fit for tests, slow for users');
      return microvm;
    }
  }
  const platform = await chooseGvisorPlatform(o.logger, o.runscPath);
  const missing = missingTools([o.runscPath ?? 'runsc']);
  if (missing.length) throw new Error(`node agent: missing host tools: ${missing.join(', ')} (scripts/install-system-deps.sh installs them)`);
  return { driver: new GvisorDriver({ stateRoot: join(o.stateDir, 'runsc'), names: o.names, logger: o.logger, runscPath: o.runscPath, platform }), platform };
}

async function microvmDriver(o: DriverChoiceOptions): Promise<DriverChoice> {
  const missing = missingTools(['qemu-system-x86_64', 'losetup', 'mkfs.ext4']);
  if (missing.length) throw new SvcError(503, `node_agent.runtime microvm: missing host tools: ${missing.join(', ')} (scripts/install-system-deps.sh installs them)`);
  const guest = await ensureGuestBoot(o.stateDir, o.guestKernelDir);
  const accel = (await kvmBootsGuest(o.logger, guest)) ? 'kvm' as const : 'tcg' as const;
  const scratchNetns = async () => {
    const name = o.names.netns(ResourceNames.newInstanceId());
    await run('ip', ['netns', 'add', name]);
    return { path: netnsPath(name), remove: async () => { await run('ip', ['netns', 'del', name], { allowFail: true }); } };
  };
  const driver = new MicrovmDriver({
    logger: o.logger, accel, guest, runtimeDisk: ensureRuntimeDisk, tscKhz: accel === 'tcg' ? await hostTscKhz() : undefined, envdTokenOf: o.envdTokenOf, scratchNetns,
    templatesDir: join(o.stateDir, 'guest', 'templates'),
  });
  // Saved guests of an earlier run: half-made ones go (a crash while making them); complete ones stay valid.
  await driver.templates.sweep();
  return { driver, platform: accel };
}
