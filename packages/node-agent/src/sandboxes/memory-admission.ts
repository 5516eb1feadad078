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

  /** Admits one create of `memoryMB` nominal, or throws 503 naming the numbers. Call the result when it is done. */
  async admit(memoryMB: number): Promise<() => void> {
    const m = await this.measure();
    const refusal = admissionRefusal(m, memoryMB, this.inFlight * m.perSandboxMB);
    if (refusal) {
      this.d.logger.warn({ memoryMB, ...m, inFlight: this.inFlight }, 'create refused: node is full');
      throw new SvcError(503, `this node cannot take another sandbox now: ${refusal}`, { headers: { 'Retry-After': '5' } });
    }
    this.inFlight++;
    let released = false;
    return () => { if (!released) { released = true; this.inFlight--; } };
  }
}
