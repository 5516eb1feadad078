import { SvcError, conflict, type Logger } from '@svc/common';
import type { LayerContents, LayerOnNode, SnapshotSandboxOnNode } from '@svc/contracts/node-agent';
import { LayerNoRoom, LayerTooLarge, type LayerStore } from '../artifacts/layer-store.ts';
import { SANDBOX_SUDO } from '../runtime/runtime-bundle.ts';
import { captureBoundBytes, captureRoomBytes } from './capture-bound.ts';
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
   * Every capture is held to its bound (capture-bound.ts); what it will likely write (what the
   * sandbox's disk holds, and its memory for a machine) is reserved where layers are written
   * before anything is paused or written (507 when there is no such room), and a capture that
   * writes more and fills the disk keeps nothing and is a 507 too.
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
      // The whole machine where the runtime can save it (its memory holds what the files lack);
      // the files alone otherwise, flushed from the sandbox's kernel first.
      const captureMachine = req.memory !== false ? driver.captureMachine?.bind(driver) : undefined;
      const contents: LayerContents = captureMachine ? 'memory' : 'filesystem';
      const maxBytes = captureBoundBytes(inst.record, contents);
      const roomBytes = captureRoomBytes(inst.record, contents, await this.diskUsed(inst));
      const room = await this.d.layers.reserve(roomBytes, `the snapshot of sandbox ${id}`);
      try {
        if (!captureMachine) {
          const flushed = await driver.exec(inst.ref, [SANDBOX_SUDO, '--sync'], { timeoutMs: 60_000 });
          if (flushed.code !== 0) throw new SvcError(500, `sandbox ${id}: sync before the snapshot failed: ${flushed.stderr.trim() || `exit ${flushed.code}`}`);
        }
        await driver.pause(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: pause for the snapshot failed`, err, { logger: this.d.logger, sandboxId: id }); });
        try {
          return await this.write(inst, layerId, contents, { maxBytes, roomBytes }, (path) => (captureMachine ? captureMachine(inst.ref, path, maxBytes) : driver.captureLayer(inst.ref, path, maxBytes)));
        } finally {
          await driver.resume(inst.ref).catch((err: Error) => {
            this.d.logger.error({ sandboxId: id, err: err.message }, 'sandbox could not be resumed after its snapshot');
          });
        }
      } finally {
        room.release();
      }
    });
  }

  /** A paused sandbox's state as a layer, read without waking it (the caller holds its lock). */
  private async capturePaused(inst: Instance, layerId: string): Promise<LayerOnNode> {
    const id = inst.record.sandboxId!;
    const driver = this.table.driverOf(inst);
    const contents: LayerContents | undefined = inst.record.pauseKind === 'snapshot' && driver.captureMachine ? 'memory'
      : inst.record.pauseKind === 'filesystem' ? 'filesystem' : undefined;
    if (!contents) throw conflict(`sandbox ${id} is paused by freezing its processes, which cannot be captured; resume it first, or pause it without its memory`);
    const maxBytes = captureBoundBytes(inst.record, contents);
    const roomBytes = captureRoomBytes(inst.record, contents, await this.diskUsed(inst));
    const room = await this.d.layers.reserve(roomBytes, `the capture of paused sandbox ${id}`);
    try {
      return await this.write(inst, layerId, contents, { maxBytes, roomBytes }, (path) => (contents === 'memory' ? driver.captureMachine!(inst.ref, path, maxBytes) : driver.captureLayer(inst.ref, path, maxBytes)));
    } finally {
      room.release();
    }
  }

  /** The bytes the sandbox's disk holds (its driver's stats); undefined when they cannot be read, and the bound is reserved. */
  private async diskUsed(inst: Instance): Promise<number | undefined> {
    return this.table.driverOf(inst).stats(inst.ref).then((s) => s.diskUsedBytes, (err: Error) => {
      this.d.logger.info({ sandboxId: inst.record.sandboxId, err: err.message }, 'disk use unknown; the capture reserves its whole bound');
      return undefined;
    });
  }

  /**
   * The layer written and kept, or nothing kept (LayerStore.add removes the part): an archive
   * that reached its bound is a 507 that says so, as is one the full disk stopped (it wrote
   * more than was reserved for it, or other writes took the room); another failure a 500 in
   * words a team may read (errors.ts). The sandbox stays as it was: the caller resumes a running one.
   */
  private async write(inst: Instance, layerId: string, contents: LayerContents, { maxBytes, roomBytes }: { maxBytes: number; roomBytes: number }, capture: (path: string) => Promise<void>): Promise<LayerOnNode> {
    const id = inst.record.sandboxId!;
    const meta = { artifactId: inst.record.artifactId, sandboxId: id, contents, createdAt: new Date().toISOString() };
    return this.d.layers.add(layerId, meta, capture, { maxBytes }).catch((err: unknown) => {
      if (err instanceof LayerTooLarge) {
        const held = contents === 'memory' ? `its ${inst.record.diskSizeMB} MB disk and ${inst.record.memoryMB} MB of memory` : `its ${inst.record.diskSizeMB} MB disk`;
        throw new SvcError(507, `sandbox ${id}: its capture reached ${maxBytes} bytes, more than ${held} can hold (a file in it claims more bytes than the disk has): nothing was kept`);
      }
      if (err instanceof LayerNoRoom) {
        throw new SvcError(507, `sandbox ${id}: the disk where this node keeps snapshots filled up while its capture was written (${roomBytes} bytes were set aside for it, what its disk held${contents === 'memory' ? ' and its memory' : ''} with a margin): nothing was kept`);
      }
      throw wrap(`sandbox ${id}: the capture failed`, err, { logger: this.d.logger, sandboxId: id });
    });
  }
}
