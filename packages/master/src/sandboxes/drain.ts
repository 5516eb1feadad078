import { createHash } from 'node:crypto';
import { notFound, unavailable, type Coordination, type Logger } from '@svc/common';
import type { DrainStatus, NodeRecord } from '@svc/contracts/master';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { Row, SandboxRepo } from './repo.ts';
import type { MasterSandboxes } from './service.ts';

type DrainRecord = Omit<DrainStatus, 'node'>;

/** The drain's lease lasts this long and is renewed every quarter of it: a stopped master's drain reads `interrupted` within a minute. */
const LEASE_TTL_MS = 60_000;
/** How long the last drain of a node can be read back. */
const RECORD_TTL_MS = 7 * 24 * 3600_000;

/** Lease and key names stay short whatever the node id's length (coordination.ts's limit); exported for tests that act as another master. */
export function drainCoordinationNames(nodeId: string): { lease: string; record: string } {
  const digest = createHash('sha256').update(nodeId).digest('hex').slice(0, 32);
  return { lease: `drain:${digest}`, record: `drain-status:${digest}` };
}

/**
 * `svc node drain` (docs/cluster.md, "Draining a node"): the node takes no new sandboxes; each
 * running sandbox is paused with its state stored and resumed on another node; each paused one
 * has its state stored, so its next resume happens elsewhere. What cannot be moved is reported,
 * and a drain may be run again.
 *
 * A drain goes on in the background of the master that started it, a few sandboxes at a time
 * (master.drain_concurrency), for as long as that takes; its course is kept in the coordination store, so any master answers
 * for it, and a lease names the master running it, so there is one drain per node at a time.
 */
export class NodeDrains {
  private readonly running = new Map<string, Promise<void>>();
  private readonly starting = new Map<string, Promise<DrainStatus>>();
  private stopping = false;

  constructor(private readonly d: {
    nodes: NodeRegistry; repo: SandboxRepo; sandboxes: MasterSandboxes; coordination: Coordination; holder: string; logger: Logger;
    /** How many sandboxes move at once (master.drain_concurrency). */
    concurrency: number;
  }) {}

  /** Starts a drain of the node, or answers the one under way. 404 for a node not registered. */
  async start(nodeId: string): Promise<DrainStatus> {
    // Two drains asked of this master at once both passed the check of `running` and both took
    // the lease (renewable by its holder, this master): one start at a time per node.
    const inFlight = this.starting.get(nodeId);
    if (inFlight) {
      await Promise.allSettled([inFlight]);
      return this.status(nodeId);
    }
    const started = this.begin(nodeId);
    this.starting.set(nodeId, started);
    try {
      return await started;
    } finally {
      this.starting.delete(nodeId);
    }
  }

  private async begin(nodeId: string): Promise<DrainStatus> {
    if (this.stopping) throw unavailable('this master is stopping; ask another');
    const node = await this.d.nodes.setDraining(nodeId, true);
    const { lease } = drainCoordinationNames(nodeId);
    if (this.running.has(nodeId) || !(await this.d.coordination.acquireLease(lease, this.d.holder, LEASE_TTL_MS))) {
      return this.status(nodeId);
    }
    let record: DrainRecord;
    try {
      const rows = await this.d.repo.listByNode(nodeId);
      record = { state: 'running', total: rows.length, remaining: rows.length, moved: [], stored: [], failed: [], startedAt: new Date().toISOString() };
      await this.save(nodeId, record);
      this.running.set(nodeId, this.run(nodeId, rows, record));
    } catch (err) {
      await this.d.coordination.releaseLease(lease, this.d.holder);
      throw err;
    }
    return { node, ...record };
  }

  /** The node takes new sandboxes again; a drain under way finishes the moves in hand and starts no more. */
  undrain(nodeId: string): Promise<NodeRecord> {
    return this.d.nodes.setDraining(nodeId, false);
  }

  /** The node's latest drain. 404 for a node not registered, or one never drained. */
  async status(nodeId: string): Promise<DrainStatus> {
    const node = await this.d.nodes.get(nodeId);
    const { lease, record: key } = drainCoordinationNames(nodeId);
    const raw = await this.d.coordination.kvGet(key);
    if (!raw) throw notFound(`node ${nodeId} has no drain on record`);
    const record = JSON.parse(raw) as DrainRecord;
    if (record.state === 'running' && !this.running.has(nodeId) && !(await this.d.coordination.leaseHolder(lease))) {
      record.state = 'interrupted';
    }
    return { node, ...record };
  }

  /** A stopping master ends its drains after the moves in hand: they read `interrupted`. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running.values());
  }

  private async run(nodeId: string, rows: Row[], record: DrainRecord): Promise<void> {
    const { lease } = drainCoordinationNames(nodeId);
    const renew = setInterval(() => {
      this.d.coordination.acquireLease(lease, this.d.holder, LEASE_TTL_MS).catch((err: Error) =>
        this.d.logger.warn({ nodeId, err: err.message }, 'drain: renewing its lease failed; it is renewed again shortly'));
    }, LEASE_TTL_MS / 4);
    renew.unref();
    try {
      // `concurrency` workers take the listed sandboxes in turn; each checks first that the
      // drain should go on, so an undrain or a stopping master ends it after the moves in hand.
      let next = 0;
      const worker = async () => {
        while (next < rows.length && record.state === 'running') {
          if (this.stopping) {
            record.state = 'interrupted';
            break;
          }
          if ((await this.d.nodes.standing(nodeId)) === 'ready') {
            record.state = 'stopped';
            break;
          }
          if (next >= rows.length || record.state !== 'running') break;
          const listed = rows[next++];
          await this.drainOne(nodeId, listed.sandbox_id, record);
          record.remaining--;
          await this.save(nodeId, record);
        }
      };
      const workers = await Promise.allSettled(Array.from({ length: Math.min(this.d.concurrency, rows.length) }, worker));
      const failure = workers.find((w): w is PromiseRejectedResult => w.status === 'rejected');
      if (failure) throw failure.reason;
      if (record.state === 'running') record.state = 'done';
    } catch (err) {
      // The store or the database failed under the drain: what is left is for a drain run again.
      record.state = 'interrupted';
      this.d.logger.error({ nodeId, err: (err as Error).message }, 'drain: stopped by an error');
    } finally {
      clearInterval(renew);
      record.finishedAt = new Date().toISOString();
      await this.save(nodeId, record).catch((err: Error) => this.d.logger.error({ nodeId, err: err.message }, 'drain: its last course could not be saved'));
      await this.d.coordination.releaseLease(lease, this.d.holder).catch((err: Error) =>
        this.d.logger.warn({ nodeId, err: err.message }, 'drain: releasing its lease failed; it lapses on its own'));
      this.running.delete(nodeId);
      this.d.logger.info({ nodeId, state: record.state, moved: record.moved.length, stored: record.stored.length, failed: record.failed }, 'node drain ended');
    }
  }

  /** One sandbox, as it is now: one that went elsewhere or ended since the drain listed it is left alone. */
  private async drainOne(nodeId: string, id: string, record: DrainRecord): Promise<void> {
    const row = await this.d.repo.get(id);
    if (!row || row.node_id !== nodeId || row.state === 'terminated') return;
    try {
      if (row.state === 'running') {
        await this.move(row);
        record.moved.push(id);
      } else if (row.state === 'paused') {
        await this.store(row);
        record.stored.push(id);
      } else {
        record.failed.push({ sandboxId: id, message: `it was ${row.state}; drain the node again` });
      }
    } catch (err) {
      record.failed.push({ sandboxId: id, message: (err as Error).message });
    }
  }

  private async save(nodeId: string, record: DrainRecord): Promise<void> {
    await this.d.coordination.kvSet(drainCoordinationNames(nodeId).record, JSON.stringify(record), RECORD_TTL_MS);
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
