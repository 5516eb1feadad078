import { SvcError, badRequest, conflict, type Logger } from '@svc/common';
import type { NodeSandbox, PauseOnNode, ResumeOnNode } from '@svc/contracts/node-agent';
import type { VolumeMountOnNode, VolumeRefFlip } from '@svc/contracts/volumes';
import { waitForEnvd } from '../envd-client.ts';
import { dropOutboundConnections } from '../network/drop-outbound.ts';
import type { VolumeAttachments } from '../volumes/attachments.ts';
import { checkResumeAdmission } from './admission.ts';
import { wrap } from './errors.ts';
import type { Instance, InstanceLauncher } from './instances.ts';
import { personalise } from './personalise.ts';
import type { RecordStore } from './record.ts';
import type { SandboxTable } from './sandbox-table.ts';
import { view, withFlips } from './sandbox-view.ts';
import { attachedVolumeIds, sandboxHolder } from './volume-holds.ts';

export interface PauseResumeDeps {
  logger: Logger;
  launcher: InstanceLauncher;
  records: RecordStore;
  volumes: VolumeAttachments;
  capacity: { cpuCount: number; memoryMB: number };
  releaseRatio: number;
  /** Nominal memory quota of the release-ratio check (node memory x memory_overcommit; default capacity). */
  memoryQuotaMB?: number;
}

/**
 * Pause and resume of sandboxes (docs/cluster.md): with their memory kept (frozen, or saved to a
 * file by the runtime), or without it (a filesystem pause: the processes end, the writable layer
 * stays, and the resume boots the sandbox again from its files).
 */
export class PauseResume {
  constructor(private readonly d: PauseResumeDeps, private readonly table: SandboxTable) {}

  async pause(id: string, opts: PauseOnNode = {}): Promise<NodeSandbox> {
    return this.table.locks.run(id, async () => {
      const inst = this.table.find(id);
      if (inst.record.phase === 'paused') throw conflict(`sandbox ${id} is already paused`);
      const driver = this.table.driverOf(inst);
      const blocked = opts.memory === false ? undefined : await driver.memoryPauseBlocked?.(inst.ref);
      if (blocked) this.d.logger.info({ sandboxId: id, reason: blocked }, 'paused without its memory');
      if (opts.memory === false || blocked) {
        const flips = await this.stopKeepingFiles(inst);
        return withFlips(view(inst), flips);
      }
      const res = await driver.pause(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: pause failed`, err, { logger: this.d.logger, sandboxId: id }); });
      await dropOutboundConnections(inst.ref.netnsPath, inst.record.hostAddress).catch((err: Error) =>
        this.d.logger.error({ sandboxId: id, err: err.message }, 'pause: the sandbox\'s outbound connections could not be dropped; they may go on after the resume'));
      Object.assign(inst.record, { phase: 'paused', pauseKind: res.kind, pausedAt: new Date().toISOString(), snapshotBytes: res.snapshotBytes });
      await this.d.records.save(inst.record);
      return view(inst);
    });
  }

  /**
   * A filesystem pause: the processes end and their memory is freed; the writable layer stays.
   * Its volumes are detached (the counts move at pause time) and attached again by the boot
   * that resumes it. A frozen sandbox keeps them: its processes still hold the mounts.
   */
  private async stopKeepingFiles(inst: Instance): Promise<VolumeRefFlip[]> {
    const id = inst.record.sandboxId!;
    const driver = this.table.driverOf(inst);
    if (!driver.stop) throw new SvcError(400, `the ${driver.kind} runtime cannot pause without memory here; pause with memory kept`);
    await driver.stop(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: filesystem pause failed`, err, { logger: this.d.logger, sandboxId: id }); });
    const attached = attachedVolumeIds(inst);
    Object.assign(inst.record, { phase: 'paused', pauseKind: 'filesystem', pausedAt: new Date().toISOString(), snapshotBytes: undefined, ...(attached.length ? { volumesDetached: true } : {}) });
    await this.d.records.save(inst.record);
    return this.d.volumes.detach(sandboxHolder(id), attached);
  }

  async resume(id: string, opts: ResumeOnNode = {}): Promise<NodeSandbox> {
    return this.table.locks.run(id, async () => {
      const inst = this.table.find(id);
      if (inst.record.phase !== 'paused') return view(inst);
      checkResumeAdmission({ state: 'paused', memoryMB: inst.record.memoryMB }, this.table.memoryHolders(), this.d.memoryQuotaMB ?? this.d.capacity.memoryMB, this.d.releaseRatio);
      if (inst.record.pauseKind === 'filesystem' || opts.memory === false) return this.rebootFromFiles(inst, opts);
      await this.table.driverOf(inst).resume(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: resume failed`, err, { logger: this.d.logger, sandboxId: id }); });
      Object.assign(inst.record, { phase: 'running', pauseKind: undefined, pausedAt: undefined, snapshotBytes: undefined });
      await this.d.records.save(inst.record);
      await waitForEnvd(inst.record.address, AbortSignal.timeout(10_000)).catch(() => {
        this.d.logger.warn({ sandboxId: id }, 'envd did not answer within 10 s of resume');
      });
      return view(inst);
    });
  }

  /**
   * Boots a sandbox again from its files: one paused without its memory, or a frozen one whose
   * memory the caller drops (E2B's connect with memory false). It gets its identity anew (envd
   * /init with the environment and token the master sends); a failed boot leaves it paused.
   */
  private async rebootFromFiles(inst: Instance, opts: ResumeOnNode): Promise<NodeSandbox> {
    const id = inst.record.sandboxId!;
    if (!opts.envVars) throw badRequest(`sandbox ${id} boots again from its files: its envVars (and envdAccessToken when it is secure) are required`);
    const flips = inst.record.pauseKind !== 'filesystem' ? await this.stopKeepingFiles(inst) : [];
    flips.push(...await this.reattach(inst, opts.volumes));
    await this.d.launcher.reboot(inst, AbortSignal.timeout(60_000)).catch(async (err) => {
      flips.push(...await this.detachForPause(inst));
      throw wrap(`sandbox ${id}: boot from its files failed`, err, { logger: this.d.logger, sandboxId: id });
    });
    const identity = {
      sandboxId: id, templateId: inst.record.templateId, envVars: opts.envVars, envdAccessToken: opts.envdAccessToken,
      defaultUser: inst.record.defaultUser, defaultWorkdir: inst.record.defaultWorkdir,
    };
    await personalise(inst, identity).catch(async (err) => {
      await this.table.driverOf(inst).stop!(inst.ref).catch((e: Error) => this.d.logger.error({ sandboxId: id, err: e.message }, 'stop after a failed /init left the sandbox running'));
      await this.detachForPause(inst);
      throw wrap(`sandbox ${id}: envd /init after the boot failed`, err, { logger: this.d.logger, sandboxId: id });
    });
    Object.assign(inst.record, { phase: 'running', pauseKind: undefined, pausedAt: undefined, snapshotBytes: undefined, startedAt: new Date().toISOString() });
    await this.d.records.save(inst.record);
    return withFlips(view(inst), flips);
  }

  /**
   * Attaches a stopped sandbox's volumes again before its boot: the master's current records
   * when it sends them (re-validated there), else the ones the node kept.
   */
  private async reattach(inst: Instance, current: VolumeMountOnNode[] | undefined): Promise<VolumeRefFlip[]> {
    const kept = inst.record.volumes ?? [];
    if (!inst.record.volumesDetached || kept.length === 0) return [];
    const mounts = current ?? kept.map(({ hostPath: _h, metadata: _m, ...m }) => m);
    const { attached, flips } = await this.d.volumes.attach(sandboxHolder(inst.record.sandboxId!), mounts);
    Object.assign(inst.record, { volumes: attached, volumesDetached: false });
    await this.d.records.save(inst.record);
    return flips;
  }

  /** After a failed boot the sandbox stays paused without its volumes attached. */
  private async detachForPause(inst: Instance): Promise<VolumeRefFlip[]> {
    const attached = attachedVolumeIds(inst);
    if (attached.length === 0) return [];
    inst.record.volumesDetached = true;
    await this.d.records.save(inst.record);
    return this.d.volumes.detach(sandboxHolder(inst.record.sandboxId!), attached);
  }
}
