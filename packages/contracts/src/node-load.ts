/** A node's measured load and the memory admission rule (part of the node agent's contract, node-agent.ts). */
/**
 * A node's memory and CPU as measured, carried by heartbeats: admission goes by what sandboxes
 * really use (an idle one uses a few tens of MB), not by their nominal memoryMB.
 */
export interface NodeLoad {
  /** The host's MemAvailable. */
  availableMB: number;
  /** Kept free for the host and the platform; admission never plans into it. */
  reserveMB: number;
  /** What one more sandbox is expected to take: the measured average, at least NEW_SANDBOX_FLOOR_MB. */
  perSandboxMB: number;
  /** Nominal quota: node memory x memory_overcommit; nominal memoryMB of sandboxes adds up under it. */
  quotaMB: number;
  /** Nominal memory counted as used (paused sandboxes after the release ratio). */
  usedNominalMB: number;
  /** CPU pressure: share of the last 10 s in which some task waited for a CPU (PSI), -1 when unknown. */
  cpuPressurePct: number;
  /** node_agent.host.quota.max_cpu_pressure: no new sandbox at or above it; 0: off. */
  maxCpuPressurePct: number;
}

export const NEW_SANDBOX_FLOOR_MB = 16;

/** Real memory above the reserve, less what creates under way were promised. */
export function realFreeMB(m: NodeLoad, pendingMB = 0): number {
  return m.availableMB - m.reserveMB - pendingMB;
}

/**
 * The admission rule, shared by the master's scheduler and the node's own last check: a new
 * sandbox of `needNominalMB` fits when the nominal quota holds it and the real memory left
 * above the reserve, less `pendingMB` already promised, holds one more sandbox's measured
 * size. Undefined: it fits; otherwise why not, with the real numbers.
 */
export function admissionRefusal(m: NodeLoad, needNominalMB: number, pendingMB = 0): string | undefined {
  if (m.maxCpuPressurePct > 0 && m.cpuPressurePct >= m.maxCpuPressurePct) {
    return `CPU pressure ${m.cpuPressurePct}% (tasks waited for a CPU that share of the last 10 s), at or above max_cpu_pressure ${m.maxCpuPressurePct}%`;
  }
  if (realFreeMB(m, pendingMB) < m.perSandboxMB) {
    return `${m.availableMB} MB of memory available${pendingMB ? ` (${pendingMB} MB promised to creates under way)` : ''}, ${m.reserveMB} MB kept in reserve, a sandbox here uses about ${m.perSandboxMB} MB`;
  }
  if (m.usedNominalMB + needNominalMB > m.quotaMB) {
    return `nominal memory quota ${m.quotaMB} MB (memory x memory_overcommit) has ${m.quotaMB - m.usedNominalMB} MB left, the sandbox asks ${needNominalMB} MB`;
  }
  return undefined;
}
