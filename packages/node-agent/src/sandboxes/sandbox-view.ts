import type { NodeSandbox } from '@svc/contracts/node-agent';
import type { VolumeRefFlip } from '@svc/contracts/volumes';
import { ENVD_PORT } from '@svc/contracts/envd-port';
import type { Instance } from './instances.ts';

/** A sandbox as the node agent's API shows it (api.ts). */
export function view(inst: Instance): NodeSandbox {
  const r = inst.record;
  return {
    sandboxId: r.sandboxId!, templateId: r.templateId, state: r.phase === 'paused' ? 'paused' : 'running',
    address: r.address, envdPort: ENVD_PORT, envdVersion: r.envdVersion, runtime: r.runtime,
    ...(r.phase === 'paused' && r.pauseKind ? { pauseKind: r.pauseKind } : {}),
    ...(r.snapshotBytes !== undefined ? { snapshotBytes: r.snapshotBytes } : {}),
    cpuCount: r.cpuCount, memoryMB: r.memoryMB, startedAt: r.startedAt,
    ...(r.fromWarmPool ? { fromWarmPool: true } : {}),
  };
}

/** The view with the volume count flips the operation caused, which the master applies. */
export function withFlips(s: NodeSandbox, flips: VolumeRefFlip[]): NodeSandbox {
  return flips.length ? { ...s, extInfo: { volumeRefFlips: flips } } : s;
}
