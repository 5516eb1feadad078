import { badRequest } from '@svc/common';
import type { RuntimeKind } from '@svc/contracts/node-agent';
import type { RuntimeDriver } from './driver.ts';

/**
 * The runtimes this node offers (node_agent.runtime, docs/runtimes.md), the default first. An
 * instance is run by the driver its record names for its whole life.
 */
export class RuntimeDrivers {
  private readonly byKind = new Map<RuntimeKind, RuntimeDriver>();

  constructor(drivers: RuntimeDriver[]) {
    if (drivers.length === 0) throw new Error('a node offers at least one runtime');
    for (const d of drivers) this.byKind.set(d.kind, d);
  }

  /** What runs a create that names no runtime. */
  get default(): RuntimeDriver {
    return this.byKind.values().next().value!;
  }

  kinds(): RuntimeKind[] {
    return [...this.byKind.keys()];
  }

  all(): RuntimeDriver[] {
    return [...this.byKind.values()];
  }

  /** The driver for a create's runtime: 400 when this node does not offer it. */
  forCreate(kind: RuntimeKind | undefined): RuntimeDriver {
    if (kind === undefined) return this.default;
    const d = this.byKind.get(kind);
    if (!d) throw badRequest(`runtime ${JSON.stringify(kind)}: this node offers ${this.kinds().join(', ')}`);
    return d;
  }

  /** The driver that runs an instance; undefined when this node no longer offers its runtime. */
  find(kind: RuntimeKind): RuntimeDriver | undefined {
    return this.byKind.get(kind);
  }

  /** The driver that runs an instance the agent holds (which it adopted or made, so its runtime is offered). */
  of(record: { runtime: RuntimeKind; instanceId: string }): RuntimeDriver {
    const d = this.byKind.get(record.runtime);
    if (!d) throw new Error(`instance ${record.instanceId} runs on ${record.runtime}, which this node does not offer`);
    return d;
  }
}
