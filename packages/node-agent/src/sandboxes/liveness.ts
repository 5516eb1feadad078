import type { Logger } from '@svc/common';
import type { EndedSandbox } from '@svc/contracts/node-agent';
import { envdHealthy } from '../envd-client.ts';
import type { VolumeAttachments } from '../volumes/attachments.ts';
import type { InstanceEndCause } from '../runtime/driver.ts';
import type { Instance, InstanceLauncher } from './instances.ts';
import type { SandboxTable } from './sandbox-table.ts';
import { attachedVolumeIds, sandboxHolder } from './volume-holds.ts';
import type { WarmPool } from './warm-pool.ts';

export interface LivenessDeps {
  logger: Logger;
  launcher: InstanceLauncher;
  volumes: VolumeAttachments;
}

/**
 * Finds sandboxes whose processes died (envd silent and the runtime says stopped) and
 * releases what they held. Paused sandboxes are not probed: they cannot answer.
 */
export class LivenessSweep {
  constructor(private readonly d: LivenessDeps, private readonly table: SandboxTable, private readonly pool: WarmPool) {}

  async sweep(): Promise<void> {
    for (const inst of this.pool.instances()) {
      if (await this.dead(inst)) {
        this.pool.discard(inst);
        await this.d.launcher.teardown(inst).catch((err) => this.d.logger.warn({ err }, 'dead warm sandbox cleanup failed'));
      }
    }
    for (const [id, inst] of this.table.entries()) {
      if (!(await this.dead(inst))) continue;
      await this.table.locks.run(id, async () => {
        if (this.table.get(id) !== inst || !(await this.dead(inst))) return;
        const cause = await this.table.driverOf(inst).endCause?.(inst.ref).catch((err) => {
          this.d.logger.warn({ err, sandboxId: id }, 'could not tell why the sandbox ended');
          return undefined;
        });
        const ended: EndedSandbox = { sandboxId: id, ...endOf(cause, inst.record.memoryMB), endedAt: new Date().toISOString() };
        this.d.logger.warn({ sandboxId: id, reason: ended.reason }, 'sandbox processes exited; releasing its resources');
        const attached = attachedVolumeIds(inst);
        await this.d.launcher.teardown(inst);
        this.table.remove(id);
        // The master learns of the end from the heartbeat, and recounts volumes from the nodes' lists.
        await this.d.volumes.detach(sandboxHolder(id), attached);
        this.table.ended(id, ended);
      }).catch((err) => this.d.logger.error({ err, sandboxId: id }, 'dead sandbox cleanup failed'));
    }
  }

  private async dead(inst: Instance): Promise<boolean> {
    if (inst.record.phase !== 'running') return false;
    const driver = this.table.driverOf(inst);
    const alive = driver.processesAlive ? await driver.processesAlive(inst.ref) : await envdHealthy(inst.record.address, 1_000);
    if (alive) return false;
    const status = await driver.status(inst.ref);
    return status === 'stopped' || status === 'missing';
  }
}

/** The reason and message a sandbox that ended on its own is reported with. */
function endOf(cause: InstanceEndCause | undefined, memoryMB: number): Pick<EndedSandbox, 'reason' | 'message'> {
  if (cause === 'oom') return { reason: 'oom', message: `it ran out of memory (more than its ${memoryMB} MB plus the runtime's headroom) and the host stopped it` };
  if (cause === 'pids_limit') return { reason: 'pids_limit', message: 'its processes and threads took more host tasks than its host allows a sandbox (pids.max), and it stopped' };
  return { reason: 'exited', message: 'its processes exited' };
}
