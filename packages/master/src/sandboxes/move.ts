import { badRequest, unavailable, type SvcError } from '@svc/common';
import type { LifecycleReason } from '@svc/contracts/master-internal';
import type { SandboxRecord, NetworkConfig } from '@svc/contracts/master';
import type { RuntimeKind } from '@svc/contracts/node-agent';
import type { SandboxContext } from './context.ts';
import { dropEgress, egressPlanOf, pushEgress } from './egress.ts';
import { nodeNetwork } from './egress-plan.ts';
import { attaching, currentVolumes, discardOnNode, dropPausePackage, placing, volumesFor } from './on-node.ts';
import { placeSandbox, type Placed } from './placement.ts';
import { toRecord } from './record.ts';
import type { Row } from './repo.ts';
import { deadlineOf, envOf, passThrough, rereadRow } from './rows.ts';
import type * as T from './timeouts.ts';

/**
 * Cross-node restore (docs/cluster.md): a paused sandbox whose node is lost or drained starts
 * on another node from its package in the artifact store, under the same id, tokens and
 * settings; the node it left removes its copy (now, when draining; when it returns, if lost).
 * Called under the lock with the row in 'resuming'.
 */
export async function moveAndResume(c: SandboxContext, cur: Row, standing: 'draining' | 'lost', reason: LifecycleReason, nextDeadline: (now: number, cur: T.Deadline) => T.Deadline): Promise<SandboxRecord> {
  const id = cur.sandbox_id;
  const plan = egressPlanOf(c, cur);
  let placed: Placed;
  try {
    const pkg = await c.d.pausePackages!.get(cur.pause_snapshot_id!);
    if (!pkg) throw unavailable(`the stored state of sandbox ${id} is gone; it resumes when node ${cur.node_id} takes it again`, 5);
    const artifact = await c.d.templates.artifactRef(pkg.artifactId);
    // A boot from files runs as the template says; a deleted template leaves envd's defaults.
    const tpl = await c.d.templates.resolveForCreate(cur.template_id).catch((err: SvcError) => {
      if (err.status === 404 || err.status === 400) return undefined;
      throw err;
    });
    const network = JSON.parse(cur.network) as NetworkConfig;
    const need = {
      memoryMB: Number(cur.memory_mb), cpuCount: Number(cur.cpu_count), runtime: cur.runtime as RuntimeKind, exclude: [cur.node_id],
      ...(cur.node_selector ? { selector: JSON.parse(cur.node_selector) as Record<string, string> } : {}),
    };
    // Claimed until the new node's answer: a DELETE of one of them refuses meanwhile.
    const recorded = await currentVolumes(c, cur);
    placed = await attaching(c, recorded.map((v) => v.volumeId), async () => {
      const answer = await placeSandbox(placing(c, id), id, need, async (nodeId) => {
        if (plan.policy && !(await c.d.egress.available(nodeId))) throw badRequest(`sandbox ${id} has network rules, which need the egress proxy, and node ${nodeId} has none`);
        const volumes = await volumesFor(c, nodeId, recorded);
        return {
          sandboxId: id, templateId: cur.template_id, artifact, cpuCount: Number(cur.cpu_count), memoryMB: Number(cur.memory_mb), diskSizeMB: Number(cur.disk_size_mb),
          envVars: envOf(cur), ...(cur.envd_access_token ? { envdAccessToken: cur.envd_access_token } : {}), layer: pkg.layer,
          allowInternetAccess: cur.allow_internet_access === null || Number(cur.allow_internet_access) !== 0,
          ...(tpl?.defaultUser ? { defaultUser: tpl.defaultUser } : {}), ...(tpl?.defaultWorkdir ? { defaultWorkdir: tpl.defaultWorkdir } : {}),
          network: nodeNetwork(network, plan),
          metadata: JSON.parse(cur.metadata) as Record<string, string>, timeoutMs: c.d.cfg.master.create_timeout_insec * 1000,
          ...(volumes.length ? { volumes } : {}), runtime: cur.runtime as RuntimeKind,
        };
      }, c.d.cfg.master.create_timeout_insec * 1000);
      await c.d.volumes?.applyFlips(answer.node.extInfo?.volumeRefFlips);
      return answer;
    });
  } catch (err) {
    await c.t.move(id, { trigger: 'resume-failed', reason });
    throw passThrough(err, `resume of sandbox ${id} on another node failed`);
  }
  // The policy on its new node before the move announces it running there.
  dropEgress(c, cur.node_id, id, plan);
  await pushEgress(c, placed.nodeId, id, placed.node.address, plan, cur.team_id).catch((err: Error) => {
    c.d.logger.error({ sandboxId: id, err: err.message }, 'moved sandbox\'s egress policy could not be set; the proxy refuses its requests until the policy is set again');
  });
  const d = nextDeadline(Date.now(), deadlineOf(cur));
  await c.t.mustMove(id, {
    trigger: 'resumed', reason, patch: {
      pause_kind: null, pause_snapshot_id: null, node_id: placed.nodeId, address: placed.node.address,
      envd_port: placed.node.envdPort, envd_version: placed.node.envdVersion, runtime: placed.node.runtime, timeout_sec: d.timeoutSec, end_at: d.endAt,
    },
  });
  c.d.logger.info({ sandboxId: id, from: cur.node_id, to: placed.nodeId, why: standing }, 'paused sandbox resumed on another node');
  void dropPausePackage(c, id, cur.pause_snapshot_id);
  // A drained node still answers: its copy goes now. A lost one removes it when it returns (reconcileNode).
  if (standing === 'draining') discardOnNode(c, await c.d.nodes.client(cur.node_id), cur.node_id, id, 'it moved to another node');
  return toRecord(await rereadRow(c, id));
}
