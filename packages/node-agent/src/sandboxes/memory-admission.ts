import { SvcError, type Logger } from '@svc/common';
import { memoryRefusal, type NodeMemory } from '../api.ts';
import { perSandboxMB, type MemoryReading } from '../host/memory-gauge.ts';

export interface MemoryAdmissionDeps {
  gauge: { read(): Promise<MemoryReading> };
  logger: Logger;
  /** Node memory x memory_overcommit. */
  quotaMB: number;
  reserveMB: number;
  /** Nominal memory in use (release ratio applied) and how many sandboxes hold real memory now (warm ones too). */
  usage: () => { usedNominalMB: number; sandboxes: number };
}

/**
 * The node's own memory admission: the last measurement for heartbeats, and a fresh one for
 * every create, with creates under way counted at one sandbox's measured size each (the
 * master's choice is made on a heartbeat up to a few seconds old; this check is the last word).
 */
export class MemoryAdmission {
  private last: NodeMemory | undefined;
  private inFlight = 0;

  constructor(private readonly d: MemoryAdmissionDeps) {}

  async measure(): Promise<NodeMemory> {
    const r = await this.d.gauge.read();
    const u = this.d.usage();
    this.last = {
      availableMB: r.availableMB, reserveMB: this.d.reserveMB, perSandboxMB: perSandboxMB(r.sandboxesMB, u.sandboxes),
      quotaMB: this.d.quotaMB, usedNominalMB: u.usedNominalMB,
    };
    return this.last;
  }

  snapshot(): NodeMemory | undefined {
    return this.last;
  }

  /** Admits one create of `memoryMB` nominal, or throws 503 naming the numbers. Call the result when it is done. */
  async admit(memoryMB: number): Promise<() => void> {
    const m = await this.measure();
    const refusal = memoryRefusal(m, memoryMB, this.inFlight * m.perSandboxMB);
    if (refusal) {
      this.d.logger.warn({ memoryMB, ...m, inFlight: this.inFlight }, 'create refused for memory');
      throw new SvcError(503, `this node cannot take another sandbox now: ${refusal}`, { headers: { 'Retry-After': '5' } });
    }
    this.inFlight++;
    let released = false;
    return () => { if (!released) { released = true; this.inFlight--; } };
  }
}
