import { notFound } from '@svc/common';
import type { EndedSandbox } from '@svc/contracts/node-agent';
import type { RuntimeDriver } from '../runtime/driver.ts';
import type { RuntimeDrivers } from '../runtime/drivers.ts';
import type { Instance } from './instances.ts';
import { KeyedMutex } from './keyed-mutex.ts';

const GONE_REMEMBERED = 1000;

/**
 * The node's handed-out sandboxes by id, one lock per id (every operation on a sandbox runs
 * under it), and the sandboxes whose processes ended.
 */
export class SandboxTable {
  private readonly byId = new Map<string, Instance>();
  /** Sandboxes whose processes died, so a later GET can say so instead of a bare 404 (and the master learns why). */
  private readonly gone = new Map<string, EndedSandbox>();
  readonly locks = new KeyedMutex();

  constructor(private readonly drivers: RuntimeDrivers) {}

  has(id: string): boolean { return this.byId.has(id); }
  get(id: string): Instance | undefined { return this.byId.get(id); }
  all(): Instance[] { return [...this.byId.values()]; }
  entries(): [string, Instance][] { return [...this.byId]; }
  ids(): string[] { return [...this.byId.keys()]; }
  get size(): number { return this.byId.size; }

  set(id: string, inst: Instance): void {
    this.byId.set(id, inst);
    this.gone.delete(id);
  }

  remove(id: string): void { this.byId.delete(id); }

  /** A sandbox whose processes ended: forgotten, and remembered as ended for a while. */
  ended(id: string, ended: EndedSandbox): void {
    this.byId.delete(id);
    this.gone.set(id, ended);
    if (this.gone.size > GONE_REMEMBERED) this.gone.delete(this.gone.keys().next().value!);
  }

  endedList(): EndedSandbox[] {
    return [...this.gone.values()].reverse();
  }

  /** The sandbox, or a 404 that says why when its processes ended. */
  find(id: string): Instance {
    const inst = this.byId.get(id);
    if (!inst || inst.record.phase === 'creating') {
      const why = this.gone.get(id)?.message;
      throw notFound(why ? `sandbox ${id} is gone: ${why}` : `sandbox ${id} not found on this node`);
    }
    return inst;
  }

  /** The driver that runs the instance (its record's runtime). */
  driverOf(inst: Instance): RuntimeDriver {
    return this.drivers.of(inst.record);
  }

  /** Sandboxes that hold memory: running or frozen (one paused without its memory holds none). */
  memoryHolders() {
    return this.all()
      .filter((i) => i.record.phase === 'running' || (i.record.phase === 'paused' && i.record.pauseKind !== 'filesystem'))
      .map((i) => ({ state: i.record.phase as 'running' | 'paused', memoryMB: i.record.memoryMB }));
  }
}
