import { randomUUID } from 'node:crypto';
import { badRequest, ErrorCodes, newSandboxId, newToken, notFound, unavailable } from '@svc/common';
import type { NodeSandbox, RuntimeKind } from '@svc/contracts/node-agent';
import type { CreateSandboxInput, SandboxRecord } from '@svc/contracts/master';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { usableBy } from '../teams/ownership.ts';
import { countCreated, countCreateFailed } from '../prometheus/operations.ts';
import type { SandboxContext } from './context.ts';
import { checkEgressProxy, checkPlaceholders, dropEgress, pushEgress } from './egress.ts';
import { nodeNetwork, planEgress } from './egress-plan.ts';
import { attaching, discardOnNode, placing, volumesFor } from './on-node.ts';
import { placeSandbox } from './placement.ts';
import type { ResolvedTemplate } from './ports.ts';
import { toRecord } from './record.ts';
import type { Row } from './repo.ts';
import { startAndWaitReady } from './start-command.ts';
import * as T from './timeouts.ts';

/** A create, counted and timed (svc_sandbox_creates_total, svc_sandbox_create_duration_seconds). */
export async function createSandbox(c: SandboxContext, input: CreateSandboxInput, resolved?: ResolvedTemplate, caller?: string): Promise<SandboxRecord> {
  const startedAt = performance.now();
  try {
    const { record, node } = await createChecked(c, input, resolved, caller);
    countCreated(startedAt, node);
    return record;
  } catch (err) {
    countCreateFailed(err);
    throw err;
  }
}

async function createChecked(c: SandboxContext, input: CreateSandboxInput, resolved: ResolvedTemplate | undefined, caller: string | undefined): Promise<{ record: SandboxRecord; node: NodeSandbox }> {
  const tpl = resolved ?? await c.d.templates.resolveForCreate(input.template, caller);
  // Another team's private template or snapshot is as unknown as a missing one (docs/security.md).
  if (tpl.owner && !usableBy(caller, tpl.owner)) throw notFound(`template ${input.template} not found`, ErrorCodes.templateNotFound);
  const teamId = caller ?? DEFAULT_TEAM_ID;
  const cpuCount = input.cpuCount ?? tpl.cpuCount ?? c.d.cfg.svclet_conf.default_cpu_count;
  const memoryMB = input.memoryMB ?? tpl.memoryMB ?? c.d.cfg.svclet_conf.default_memory_mb;
  const release = await c.quota.admit(teamId, { memoryMB, cpuCount, newSandbox: true });
  try {
    return await createAdmitted(c, input, tpl, teamId, cpuCount, memoryMB);
  } finally {
    await release();
  }
}

async function createAdmitted(c: SandboxContext, input: CreateSandboxInput, tpl: ResolvedTemplate, teamId: string, cpuCount: number, memoryMB: number): Promise<{ record: SandboxRecord; node: NodeSandbox }> {
  // A snapshot's own mounts, unless the create names mounts of its own (docs/volumes.md).
  const asked = input.volumeMounts.length > 0 ? input.volumeMounts : (tpl.volumeMounts ?? []).map((m) => ({ name: m.volumeId, path: m.path, readOnly: m.readOnly }));
  if (asked.length > 0 && !c.d.volumes) throw notFound(`volume ${asked[0].name} not found`);
  const mounts = asked.length > 0 ? await c.d.volumes!.resolveMounts(teamId, asked) : [];
  const now = Date.now();
  const deadline = T.atCreate(now, input.timeout, c.d.cfg.svclet_conf.default_timeout_insec);
  const egress = planEgress(input.network, input.allowInternetAccess !== false);
  await checkPlaceholders(c, input.network, teamId, Object.keys(input.iam?.tokens ?? {}));
  await checkEgressProxy(c, input.network);
  const runtime = runtimeFor(input, tpl);
  const envVars = { ...tpl.envVars, ...input.envVars };
  const sandboxId = newSandboxId();
  // A private sandbox is always secure: its envd port is guarded by the envd access token.
  const secure = input.secure || !input.network.allowPublicTraffic;
  const envdAccessToken = secure ? newToken() : undefined;
  const trafficAccessToken = input.network.allowPublicTraffic ? undefined : randomUUID();
  const timeoutMs = c.d.cfg.master.create_timeout_insec * 1000;
  // A fork's capture is on the origin's node only: its sandboxes start there.
  const need = {
    memoryMB, cpuCount, ...(tpl.layer?.nodeId ? { onNode: tpl.layer.nodeId } : {}), ...(runtime ? { runtime } : {}),
    ...(input.nodeSelector ? { selector: input.nodeSelector } : {}),
  };
  // Claimed from here until the node's answer: a DELETE of a volume that was read above refuses meanwhile.
  const { nodeId, client, node } = await attaching(c, mounts.map((m) => m.onNode.volumeId), async () => {
    const placed = await placeSandbox(placing(c, sandboxId), sandboxId, need, async (nodeId) => {
      if (egress.policy && !(await c.d.egress.available(nodeId))) {
        throw badRequest(`network rules, host names in allowOut and egressProxy need the egress proxy, and node ${nodeId} has none (egress.enabled is false there)`);
      }
      const volumes = await volumesFor(c, nodeId, mounts.map((m) => m.onNode));
      return {
        sandboxId, templateId: tpl.templateId, artifact: tpl.artifact, cpuCount, memoryMB, diskSizeMB: tpl.diskSizeMB,
        envVars, envdAccessToken, ...(tpl.layer ? { layer: tpl.layer.ref } : {}), allowInternetAccess: input.allowInternetAccess !== false,
        ...(tpl.defaultUser ? { defaultUser: tpl.defaultUser } : {}), ...(tpl.defaultWorkdir ? { defaultWorkdir: tpl.defaultWorkdir } : {}),
        network: nodeNetwork(input.network, egress),
        metadata: input.metadata, timeoutMs, ...(volumes.length ? { volumes } : {}), ...(runtime ? { runtime } : {}),
      };
    }, timeoutMs);
    await c.d.volumes?.applyFlips(placed.node.extInfo?.volumeRefFlips);
    return placed;
  });
  // Before anything runs in it: until the proxy has the policy, it refuses the sandbox's requests.
  await pushEgress(c, nodeId, sandboxId, node.address, egress, teamId).catch((err) => {
    discardOnNode(c, client, nodeId, sandboxId, 'its egress policy could not be set');
    throw err;
  });
  if (tpl.start) {
    await startAndWaitReady(client, sandboxId, { ...tpl.start, envVars }).catch((err) => {
      dropEgress(c, nodeId, sandboxId, egress);
      discardOnNode(c, client, nodeId, sandboxId, 'its start command did not come up');
      throw err;
    });
  }
  const started = Date.now();
  const row: Row = {
    sandbox_id: sandboxId, team_id: teamId, iam: input.iam ? JSON.stringify(input.iam.tokens) : null, template_id: tpl.templateId, alias: tpl.alias ?? null, node_id: nodeId,
    state: 'running', pause_kind: null, address: node.address, envd_port: node.envdPort, envd_version: node.envdVersion,
    envd_access_token: envdAccessToken ?? null, traffic_access_token: trafficAccessToken ?? null,
    secure: secure ? 1 : 0, runtime: node.runtime, cpu_count: cpuCount, memory_mb: memoryMB,
    disk_size_mb: tpl.diskSizeMB, metadata: JSON.stringify(input.metadata), network: JSON.stringify(input.network),
    allow_internet_access: input.allowInternetAccess === undefined ? null : input.allowInternetAccess ? 1 : 0,
    on_timeout: input.onTimeout, auto_resume: input.autoResume ? 1 : 0,
    timeout_sec: deadline.timeoutSec,
    // The idle clock starts once the sandbox runs, not when the request came in.
    end_at: deadline.endAt === null ? null : deadline.endAt + (started - now),
    started_at: started, created_at: now, updated_at: started, terminated_at: null, terminate_reason: null,
    volume_mounts: JSON.stringify(mounts.length ? mounts.map((m) => m.mount) : asked), env_vars: JSON.stringify(envVars), auto_pause_memory: input.pauseMemory === false ? 0 : 1,
    pause_snapshot_id: null, node_selector: input.nodeSelector && Object.keys(input.nodeSelector).length ? JSON.stringify(input.nodeSelector) : null,
  };
  let record: SandboxRecord;
  try {
    record = toRecord(row);
    await c.t.create(row, tpl.artifact.artifactId);
  } catch (err) {
    // Atomic create: a sandbox that cannot be recorded must not keep running unseen.
    discardOnNode(c, client, nodeId, sandboxId, 'the master could not record it');
    dropEgress(c, nodeId, sandboxId, egress);
    c.d.logger.error({ sandboxId, nodeId, err }, 'sandbox started but could not be recorded; stopped it');
    // The database's words stay in the log: they may name its host, and the caller can only retry.
    throw unavailable('sandbox could not be recorded; nothing was kept, retry', 2);
  }
  return { record, node };
}

/**
 * The runtime a create asks for (docs/runtimes.md): the request's, else a saved machine's
 * (microvm: only it restores one), else the template's; undefined: the chosen node's default.
 */
function runtimeFor(input: CreateSandboxInput, tpl: ResolvedTemplate): RuntimeKind | undefined {
  const machine = tpl.layer?.ref.contents === 'memory';
  const runtime = input.runtime ?? (machine ? 'microvm' : tpl.runtime);
  if (machine && runtime !== 'microvm') {
    throw badRequest(`snapshot ${tpl.layer!.snapshotId} holds a running machine, which only the microvm runtime restores; runtime ${runtime} cannot start it`);
  }
  return runtime;
}
