import { conflict, SvcError } from '@svc/common';
import type { NetworkConfig, SandboxRecord, VolumeMount } from '@svc/contracts/master';
import type { NodeAgentClient } from '@svc/contracts/node-agent';
import type { SandboxContext } from './context.ts';
import { toRecord } from './record.ts';
import { envOf, liveRow, settledRow } from './rows.ts';

export async function getSandbox(c: SandboxContext, id: string): Promise<SandboxRecord> {
  const rec = c.damaged.read(await liveRow(c, id));
  if (!rec) throw new SvcError(500, `the record of sandbox ${id} is damaged; the master's log and /notify/health say how`);
  return rec;
}

/**
 * A running sandbox as a snapshot or fork needs it: its record, the environment it was created
 * with, and a client of its node. 409 when it is paused (connect to it first), 404/410 when gone.
 */
export async function snapshotSource(c: SandboxContext, id: string): Promise<{ record: SandboxRecord; envVars: Record<string, string>; network: NetworkConfig; volumeMounts: Array<VolumeMount & { volumeId?: string }>; node: NodeAgentClient }> {
  const row = await settledRow(c, id);
  if (row.state !== 'running') throw conflict(`sandbox ${id} is ${row.state}; a snapshot is taken of a running sandbox (connect to it first)`);
  return {
    record: toRecord(row),
    envVars: envOf(row),
    // With its inject secrets, which the record shows redacted: a fork enforces the same policy.
    network: JSON.parse(row.network) as NetworkConfig,
    // With their volume ids, which a snapshot keeps and a fork mounts again.
    volumeMounts: JSON.parse(row.volume_mounts) as Array<VolumeMount & { volumeId?: string }>,
    node: await c.d.nodes.client(row.node_id),
  };
}
