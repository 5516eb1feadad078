import type { Coordination, Logger, SvcConfig } from '@svc/common';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { DamagedRows } from './damaged-rows.ts';
import type { EgressPolicies, PausePackages, PlatformEndpointCheck, ProxyCachePurger, SandboxEventLog, SandboxMetricsHistory, SandboxVolumes, SecretNames, TeamQuotas, TemplateResolver } from './ports.ts';
import type { SandboxQuota } from './quota.ts';
import type { SandboxRepo } from './repo.ts';
import type { SandboxTransitions } from './transitions.ts';

export interface MasterSandboxesDeps {
  cfg: SvcConfig;
  repo: SandboxRepo;
  nodes: NodeRegistry;
  templates: TemplateResolver;
  coordination: Coordination;
  proxies: ProxyCachePurger;
  egress: EgressPolicies;
  logger: Logger;
  /** Checks a sandbox's egressProxy address; absent: not checked (unit tests of other parts). */
  endpoints?: PlatformEndpointCheck;
  /** Teams' limits; absent: no quotas (unit tests of other parts). */
  quotas?: TeamQuotas;
  /** Which secret names a team lacks; absent: no vault, so no secret placeholders. */
  secrets?: SecretNames;
  /** Persistent volumes; absent: none exist, so a create that mounts one fails with 404. */
  volumes?: SandboxVolumes;
  /** Pause packages in the artifact store (cross-node restore); absent: a paused sandbox stays on its node. */
  pausePackages?: PausePackages;
  /** The lifecycle event log (events/recorder.ts); absent: no events kept (unit tests of other parts). */
  events?: SandboxEventLog;
  /** The metrics history (metrics-history/history.ts); absent: a metrics read answers the sample taken now. */
  metricsHistory?: SandboxMetricsHistory;
  /** How long a DELETE waits for the node before answering 408 (default 30 s). */
  deleteTimeoutMs?: number;
}

/** What every sandbox operation of the master works with (service.ts makes one). */
export interface SandboxContext {
  d: MasterSandboxesDeps;
  /** The state table's moves and the per-sandbox lock. */
  t: SandboxTransitions;
  quota: SandboxQuota;
  damaged: DamagedRows;
  /** `node/sandbox` → when this master first saw the node run it with no record putting it there. */
  orphansSeen: Map<string, number>;
}
