import { SvcError, type Logger } from '@svc/common';
import { admissionRefusal, type NodeLoad } from '@svc/contracts/node-agent';
import { perSandboxMB, type MemoryReading } from '../host/memory-gauge.ts';

export interface MemoryAdmissionDeps {
  gauge: { read(): Promise<MemoryReading> };
  logger: Logger;
  /** Node memory x memory_overcommit. */
  quotaMB: number;
  reserveMB: number;
  /** node_agent.host.quota.max_cpu_pressure (0: off). */
  maxCpuPressurePct: number;
  /** Nominal memory in use (release ratio applied) and how many sandboxes hold real memory now (warm ones too). */
  usage: () => { usedNominalMB: number; sandboxes: number };
}

/**
 * The node's own memory admission: the last measurement for heartbeats, and a fresh one for
 * every create, with creates under way counted at one sandbox's measured size each (the
 * master's choice is made on a heartbeat up to a few seconds old; this check is the last word).
 */
export class MemoryAdmission {
  private last: NodeLoad | undefined;
  private inFlight = 0;
  /** Nominal memory of the creates admitted and not made yet. */
  private inFlightMB = 0;
  /** Admissions run one after another (admit). */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly d: MemoryAdmissionDeps) {}

  async measure(): Promise<NodeLoad> {
    const r = await this.d.gauge.read();
    const u = this.d.usage();
    this.last = {
      availableMB: r.availableMB, reserveMB: this.d.reserveMB, perSandboxMB: perSandboxMB(r.sandboxesMB, u.sandboxes),
      quotaMB: this.d.quotaMB, usedNominalMB: u.usedNominalMB,
      cpuPressurePct: r.cpuPressurePct, maxCpuPressurePct: this.d.maxCpuPressurePct,
    };
    return this.last;
  }

  snapshot(): NodeLoad | undefined {
    return this.last;
  }

  /**
   * Admits one create of `memoryMB` nominal, or throws 503 naming the numbers. Call the result
   * when it is done. One at a time: creates that arrive together (from several masters too)
   * each see the others, so the node is never admitted past its limits.
   */
  admit(memoryMB: number): Promise<() => void> {
    const turn = this.queue.then(() => this.admitNow(memoryMB));
    // The next admission waits for this one's check, not for its outcome.
    this.queue = turn.then(() => undefined, () => { /* the refusal reaches the caller through `turn`; the queue only orders */ return undefined; });
    return turn;
  }

  private async admitNow(memoryMB: number): Promise<() => void> {
    const measured = await this.measure();
    // Creates admitted but not made yet hold their nominal memory as well as their real share.
    const m = { ...measured, usedNominalMB: measured.usedNominalMB + this.inFlightMB };
    const refusal = admissionRefusal(m, memoryMB, this.inFlight * m.perSandboxMB);
    if (refusal) {
      this.d.logger.warn({ memoryMB, ...m, inFlight: this.inFlight }, 'create refused: node is full');
      throw new SvcError(503, `this node cannot take another sandbox now: ${refusal}`, { headers: { 'Retry-After': '5' } });
    }
    this.inFlight++;
    this.inFlightMB += memoryMB;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      this.inFlightMB -= memoryMB;
    };
  }

}
