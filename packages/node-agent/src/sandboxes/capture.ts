import { SvcError, conflict, type Logger } from '@svc/common';
import type { LayerOnNode, SnapshotSandboxOnNode } from '@svc/contracts/node-agent';
import type { LayerStore } from '../artifacts/layer-store.ts';
import { SANDBOX_SUDO } from '../runtime/runtime-bundle.ts';
import { wrap } from './errors.ts';
import type { Instance } from './instances.ts';
import type { SandboxTable } from './sandbox-table.ts';

/** Snapshots: a sandbox captured as a new layer on this node (its files, or its whole machine). */
export class SandboxCapture {
  constructor(private readonly d: { logger: Logger; layers: LayerStore }, private readonly table: SandboxTable) {}

  /**
   * Captures a running sandbox as a new layer on this node: its whole machine where the runtime
   * can save one (microvm, unless `memory: false`), else its writable layer with its kernel's
   * buffers flushed (`sync` inside); the sandbox is paused while it is read, then resumed.
   * A paused sandbox is captured as it lies (its pause package, docs/cluster.md): a saved
   * machine whole, a filesystem pause's files; a frozen one cannot be (409).
   */
  async snapshot(id: string, req: SnapshotSandboxOnNode): Promise<LayerOnNode> {
    const { layerId } = req;
    return this.table.locks.run(id, async () => {
      const inst = this.table.find(id);
      if (this.d.layers.get(layerId)) throw conflict(`layer ${layerId} already exists on this node`);
      if (inst.record.phase !== 'running') return this.capturePaused(inst, layerId);
      const driver = this.table.driverOf(inst);
      const blocked = await driver.memoryPauseBlocked?.(inst.ref);
      if (blocked) throw conflict(`sandbox ${id} cannot be captured: ${blocked}`);
      const used = (await driver.stats(inst.ref).catch((err: Error) => {
        // The free-space check is a courtesy (the capture itself fails on a full disk): go on without it.
        this.d.logger.warn({ sandboxId: id, err: err.message }, 'snapshot: the sandbox\'s disk use could not be read; captured without the free-space check');
        return undefined;
      }))?.diskUsedBytes;
      const free = await this.d.layers.freeBytes();
      if (used !== undefined && used > free) {
        throw new SvcError(507, `sandbox ${id} holds ${used} bytes of changed files, more than the ${free} bytes free where this node keeps snapshots`);
      }
      // The whole machine where the runtime can save it (its memory holds what the files lack);
      // the files alone otherwise, flushed from the sandbox's kernel first.
      const captureMachine = req.memory !== false ? driver.captureMachine?.bind(driver) : undefined;
      if (!captureMachine) {
        const flushed = await driver.exec(inst.ref, [SANDBOX_SUDO, '--sync'], { timeoutMs: 60_000 });
        if (flushed.code !== 0) throw new SvcError(500, `sandbox ${id}: sync before the snapshot failed: ${flushed.stderr.trim() || `exit ${flushed.code}`}`);
      }
      await driver.pause(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: pause for the snapshot failed`, err); });
      try {
        return await this.d.layers.add(layerId, {
          artifactId: inst.record.artifactId, sandboxId: id, contents: captureMachine ? 'memory' : 'filesystem', createdAt: new Date().toISOString(),
        }, (path) => (captureMachine ? captureMachine(inst.ref, path) : driver.captureLayer(inst.ref, path)));
      } finally {
        await driver.resume(inst.ref).catch((err: Error) => {
          this.d.logger.error({ sandboxId: id, err: err.message }, 'sandbox could not be resumed after its snapshot');
        });
      }
    });
  }

  /** A paused sandbox's state as a layer, read without waking it (the caller holds its lock). */
  private async capturePaused(inst: Instance, layerId: string): Promise<LayerOnNode> {
    const id = inst.record.sandboxId!;
    const driver = this.table.driverOf(inst);
    const meta = { artifactId: inst.record.artifactId, sandboxId: id, createdAt: new Date().toISOString() };
    if (inst.record.pauseKind === 'snapshot' && driver.captureMachine) {
      return this.d.layers.add(layerId, { ...meta, contents: 'memory' }, (path) => driver.captureMachine!(inst.ref, path));
    }
    if (inst.record.pauseKind === 'filesystem') {
      return this.d.layers.add(layerId, { ...meta, contents: 'filesystem' }, (path) => driver.captureLayer(inst.ref, path));
    }
    throw conflict(`sandbox ${id} is paused by freezing its processes, which cannot be captured; resume it first, or pause it without its memory`);
  }
}
