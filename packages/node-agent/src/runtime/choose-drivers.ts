import { join } from 'node:path';
import { runtimeSetting, SvcError, type Logger } from '@svc/common';
import type { RuntimeKind } from '@svc/contracts/node-agent';
import { ResourceNames } from '../names.ts';
import { netnsPath } from '../network/netns.ts';
import { run } from '../host/exec.ts';
import type { RuntimeDriver } from './driver.ts';
import { RuntimeDrivers } from './drivers.ts';
import { GvisorDriver } from './gvisor.ts';
import { chooseGvisorPlatform } from './gvisor-platform.ts';
import { ensureGuestBoot, ensureRuntimeDisk, hostTscKhz } from './microvm/guest-assets.ts';
import { kvmBootsGuest } from './microvm/kvm-probe.ts';
import { MicrovmDriver } from './microvm/microvm.ts';
import { qemuFeatures } from './microvm/qemu-features.ts';
import { missingTools } from '../host/host-facts.ts';

export interface DriverChoice {
  drivers: RuntimeDrivers;
  /** What runs the sandboxes, for the log, per runtime: ptrace/kvm (gvisor) or tcg/kvm (microvm). */
  platforms: Partial<Record<RuntimeKind, string>>;
}

export interface DriverChoiceOptions {
  /** node_agent.runtime (runtimeSetting). */
  runtime: string;
  guestKernelDir: string;
  /** node_agent.qemu_binary: the QEMU the microvm driver runs. */
  qemuBinary: string;
  stateDir: string;
  names: ResourceNames;
  logger: Logger;
  runscPath?: string;
  envdTokenOf: (instanceId: string) => string | undefined;
}

/**
 * `node_agent.runtime`: auto takes microvm only where KVM boots a guest, else gvisor; a list
 * (gvisor, microvm, or both) makes each, the first the default; microvm under TCG is for
 * tests: slow (docs/runtimes.md).
 */
export async function chooseDrivers(o: DriverChoiceOptions): Promise<DriverChoice> {
  const setting = runtimeSetting(o.runtime);
  if (!setting) throw new Error(`node_agent.runtime: ${JSON.stringify(o.runtime)} is not auto, gvisor, microvm or a list of them`);
  if (setting === 'auto') {
    const microvm = await microvmDriver(o).catch((err: Error) => {
      o.logger.info({ reason: err.message }, 'runtime auto: microvm not available here');
      return undefined;
    });
    if (microvm?.platform === 'kvm') return { drivers: new RuntimeDrivers([microvm.driver]), platforms: { microvm: 'kvm' } };
    const gvisor = await gvisorDriver(o);
    return { drivers: new RuntimeDrivers([gvisor.driver]), platforms: { gvisor: gvisor.platform } };
  }
  const made: Array<{ driver: RuntimeDriver; platform: string }> = [];
  for (const kind of setting) {
    const one = kind === 'gvisor' ? await gvisorDriver(o) : await microvmDriver(o);
    if (kind === 'microvm' && one.platform === 'tcg') o.logger.warn('microvm runs under TCG (software emulation, no KVM here): fit for tests, slow for users');
    made.push(one);
  }
  return { drivers: new RuntimeDrivers(made.map((m) => m.driver)), platforms: Object.fromEntries(made.map((m) => [m.driver.kind, m.platform])) };
}

async function gvisorDriver(o: DriverChoiceOptions): Promise<{ driver: RuntimeDriver; platform: string }> {
  const platform = await chooseGvisorPlatform(o.logger, o.runscPath);
  const missing = missingTools([o.runscPath ?? 'runsc']);
  if (missing.length) throw new Error(`node agent: missing host tools: ${missing.join(', ')} (scripts/install-system-deps.sh installs them)`);
  return { driver: new GvisorDriver({ stateRoot: join(o.stateDir, 'runsc'), names: o.names, logger: o.logger, runscPath: o.runscPath, platform }), platform };
}

async function microvmDriver(o: DriverChoiceOptions): Promise<{ driver: RuntimeDriver; platform: string }> {
  const qemu = o.qemuBinary;
  const missing = missingTools([qemu, 'losetup', 'mkfs.ext4']);
  if (missing.length) throw new SvcError(503, `node_agent.runtime microvm: missing host tools: ${missing.join(', ')} (scripts/install-system-deps.sh installs them)`);
  const guest = await ensureGuestBoot(o.stateDir, o.guestKernelDir);
  const accel = (await kvmBootsGuest(o.logger, guest, qemu)) ? 'kvm' as const : 'tcg' as const;
  const features = await qemuFeatures(qemu);
  o.logger.info({ qemu, version: features.version, fileRomOption: features.fileRomOption }, 'microvm runtime: the QEMU it runs');
  const scratchNetns = async () => {
    const name = o.names.netns(ResourceNames.newInstanceId());
    await run('ip', ['netns', 'add', name]);
    return { path: netnsPath(name), remove: async () => { await run('ip', ['netns', 'del', name], { allowFail: true }); } };
  };
  const driver = new MicrovmDriver({
    logger: o.logger, accel, guest, runtimeDisk: ensureRuntimeDisk, tscKhz: accel === 'tcg' ? await hostTscKhz() : undefined, envdTokenOf: o.envdTokenOf, scratchNetns,
    templatesDir: join(o.stateDir, 'guest', 'templates'), qemuPath: qemu, qemu: features,
  });
  // Saved guests of an earlier run: half-made ones go (a crash while making them); complete ones stay valid.
  await driver.templates.sweep();
  return { driver, platform: accel };
}
