import type { EndedSandbox, NodeAgentClient, SandboxLogs } from '@svc/contracts/node-agent';
import type { SandboxLogSelection } from '@svc/contracts/sandbox-logs';
import type { PlatformAddresses, SandboxEgressPolicy } from '@svc/contracts/egress';
import type { ConnectResult, CreateSandboxInput, ListSandboxesQuery, MetricsRange, NetworkConfig, SandboxPage, SandboxRecord, VolumeMount } from '@svc/contracts/master';
import type { SignedFileRequest } from '@svc/common/envd-signature';
import type { DueSandbox, LifecycleReason, SandboxRoute, TerminateReason } from '@svc/contracts/master-internal';
import type { MasterSandboxesDeps, SandboxContext } from './context.ts';
import { DamagedRows } from './damaged-rows.ts';
import { egressPolicies, platformAddresses } from './egress.ts';
import { createSandbox } from './create.ts';
import { killSandbox, killTeam } from './kill.ts';
import { listSandboxes } from './listing.ts';
import { updateNetwork } from './network.ts';
import type { NetworkUpdate } from './create-input.ts';
import { pauseSandbox, storePausePackage } from './pause.ts';
import type { ResolvedTemplate } from './ports.ts';
import { SandboxQuota } from './quota.ts';
import { dueSandboxes, recordActivity, refreshSandbox, setSandboxTimeout } from './deadlines.ts';
import { sandboxLogs, sandboxMetrics } from './observe.ts';
import { getSandbox, snapshotSource } from './reads.ts';
import { SignerLookup } from './signer-lookup.ts';
import { routeBySignature, routeOf } from './routing.ts';
import { connectSandbox, resumeForTraffic, resumeMoved, resumeSandbox } from './resume.ts';
import { reconcileNode, recordEnded, removeOrphans, sweepLostNodes } from './sweeps.ts';
import { SandboxTransitions } from './transitions.ts';

export type { MasterSandboxesDeps } from './context.ts';

/**
 * The master's sandboxes: what the routes, drains, snapshots and sweeps call. Each operation is a
 * module of its own (create.ts, pause.ts, resume.ts, move.ts, kill.ts, sweeps.ts, ...); every
 * change of state goes through transitions.ts and the table of state-table.ts (docs/design.md,
 * "Sandbox states").
 */
export class MasterSandboxes {
  readonly damaged: DamagedRows;
  private readonly c: SandboxContext;
  private readonly signers: SignerLookup;

  constructor(d: MasterSandboxesDeps) {
    this.damaged = new DamagedRows(d.logger);
    this.signers = new SignerLookup(() => d.repo.envdTokens());
    this.c = {
      d,
      t: new SandboxTransitions({ repo: d.repo, coordination: d.coordination, proxies: d.proxies, logger: d.logger, events: d.events }),
      quota: new SandboxQuota(d.quotas, (teamId) => d.repo.teamUsage(teamId), d.coordination, d.logger),
      damaged: this.damaged,
      orphansSeen: new Map(),
    };
  }

  /** The admission a create of this size makes, given back at once: 429 when the team is at a limit (a fork asks it before its capture). */
  checkCreateQuota(teamId: string, need: { memoryMB: number; cpuCount: number }): Promise<void> { return this.c.quota.check(teamId, need); }
  /** A create for `caller` (undefined: the operator, the default team); `resolved` for a fork, which knows its start. */
  create(input: CreateSandboxInput, resolved?: ResolvedTemplate, caller?: string): Promise<SandboxRecord> { return createSandbox(this.c, input, resolved, caller); }
  get(id: string): Promise<SandboxRecord> { return getSandbox(this.c, id); }
  /** A team's sandboxes (undefined: every team's, the operator's view). */
  list(q: ListSandboxesQuery, caller?: string): Promise<SandboxPage> { return listSandboxes(this.c, q, caller); }
  kill(id: string, reason: TerminateReason = 'killed'): Promise<void> { return killSandbox(this.c, id, reason); }
  killTeam(teamId: string): Promise<{ killedCount: number; failedCount: number }> { return killTeam(this.c, teamId); }
  pause(id: string, reason: LifecycleReason = 'api', opts: { memory?: boolean; store?: boolean } = {}): Promise<SandboxRecord> { return pauseSandbox(this.c, id, reason, opts); }
  storePausePackage(id: string): Promise<void> { return storePausePackage(this.c, id); }
  connect(id: string, timeout: number | undefined, opts: { memory?: boolean } = {}): Promise<ConnectResult> { return connectSandbox(this.c, id, timeout, opts); }
  resume(id: string, timeout: number | undefined, opts: { memory?: boolean } = {}): Promise<SandboxRecord> { return resumeSandbox(this.c, id, timeout, opts); }
  resumeMoved(id: string): Promise<SandboxRecord> { return resumeMoved(this.c, id); }
  resumeForTraffic(id: string, reason: LifecycleReason): Promise<SandboxRoute> { return resumeForTraffic(this.c, id, reason); }
  setTimeout(id: string, timeout: number): Promise<SandboxRecord> { return setSandboxTimeout(this.c, id, timeout); }
  refresh(id: string, duration: number | undefined): Promise<SandboxRecord> { return refreshSandbox(this.c, id, duration); }
  updateNetwork(id: string, update: NetworkUpdate): Promise<SandboxRecord> { return updateNetwork(this.c, id, update); }
  metrics(id: string, range: MetricsRange = {}) { return sandboxMetrics(this.c, id, range); }
  logs(id: string, q: SandboxLogSelection): Promise<SandboxLogs> { return sandboxLogs(this.c, id, q); }
  snapshotSource(id: string): Promise<{ record: SandboxRecord; envVars: Record<string, string>; network: NetworkConfig; volumeMounts: Array<VolumeMount & { volumeId?: string }>; node: NodeAgentClient }> {
    return snapshotSource(this.c, id);
  }
  /** A snapshot was taken of it: E2B's `snapshotted` event. */
  async snapshotted(id: string, snapshotId: string): Promise<void> {
    const row = await this.c.d.repo.get(id);
    if (row) await this.c.t.recordChange(row, 'sandbox.lifecycle.snapshotted', { snapshot_id: snapshotId });
  }

  route(id: string): Promise<SandboxRoute> { return routeOf(this.c, id); }
  routeBySignature(signed: SignedFileRequest): Promise<SandboxRoute> { return routeBySignature(this.c, this.signers, signed); }
  activity(ids: string[]): Promise<void> { return recordActivity(this.c, ids); }
  due(): Promise<DueSandbox[]> { return dueSandboxes(this.c); }
  egressPolicies(nodeId: string): Promise<SandboxEgressPolicy[]> { return egressPolicies(this.c, nodeId); }
  platformAddresses(): Promise<PlatformAddresses> { return platformAddresses(this.c); }

  reconcileNode(nodeId: string): Promise<void> { return reconcileNode(this.c, nodeId); }
  sweepLostNodes(): Promise<void> { return sweepLostNodes(this.c); }
  removeOrphans(nodeId: string, graceMs: number): Promise<string[]> { return removeOrphans(this.c, nodeId, graceMs); }
  recordEnded(nodeId: string, ended: EndedSandbox[]): Promise<void> { return recordEnded(this.c, nodeId, ended); }
}
