import type { Logger } from '@svc/common';
import type { DrainReport } from '@svc/contracts/master';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { Row, SandboxRepo } from './repo.ts';
import type { SandboxService } from './service.ts';

/**
 * `svc node drain` (docs/cluster.md, "Draining a node"): the node takes no new sandboxes; each
 * running sandbox is paused with its state stored and resumed on another node; each paused one
 * has its state stored, so its next resume happens elsewhere. What cannot be moved is reported,
 * and a drain may be run again.
 */
export class NodeDrain {
  constructor(private readonly d: { nodes: NodeRegistry; repo: SandboxRepo; sandboxes: SandboxService; logger: Logger }) {}

  async drain(nodeId: string): Promise<DrainReport> {
    await this.d.nodes.setDraining(nodeId, true);
    const report: Omit<DrainReport, 'node'> = { moved: [], stored: [], failed: [] };
    for (const row of await this.d.repo.listByNode(nodeId)) {
      const id = row.sandbox_id;
      try {
        if (row.state === 'running') {
          await this.move(row);
          report.moved.push(id);
        } else if (row.state === 'paused') {
          await this.store(row);
          report.stored.push(id);
        } else {
          report.failed.push({ sandboxId: id, message: `it was ${row.state}; drain the node again` });
        }
      } catch (err) {
        report.failed.push({ sandboxId: id, message: (err as Error).message });
      }
    }
    this.d.logger.info({ nodeId, moved: report.moved.length, stored: report.stored.length, failed: report.failed }, 'node drained');
    return { node: await this.d.nodes.get(nodeId), ...report };
  }

  /**
   * Paused and stored, then resumed elsewhere. A microvm keeps its memory and processes; gVisor
   * here can only capture its files (a frozen sandbox cannot be read), so it boots again there.
   */
  private async move(row: Row): Promise<void> {
    const id = row.sandbox_id;
    await this.d.sandboxes.pause(id, 'drain', { memory: row.runtime === 'microvm', store: true });
    const stored = (await this.d.repo.get(id))?.pause_snapshot_id;
    await this.d.sandboxes.resumeMoved(id);
    if (!stored) throw new Error('its state could not be stored, so it was resumed where it was (the master\'s log says why)');
  }

  /** A frozen sandbox is woken and paused again without its memory, which can be captured. */
  private async store(row: Row): Promise<void> {
    if (row.pause_snapshot_id) return;
    if (row.pause_kind === 'freeze') {
      await this.d.sandboxes.resumeMoved(row.sandbox_id);
      await this.d.sandboxes.pause(row.sandbox_id, 'drain', { memory: false, store: true });
      if (!(await this.d.repo.get(row.sandbox_id))?.pause_snapshot_id) throw new Error('its state could not be stored (the master\'s log says why)');
      return;
    }
    await this.d.sandboxes.storePausePackage(row.sandbox_id);
  }
}
