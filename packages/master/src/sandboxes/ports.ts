/** What the sandbox service needs from the rest of the master, as small interfaces. */
import type { SandboxEventData, SandboxEventType } from '@svc/contracts/events';
import type { SandboxRow } from '../db/schema.ts';
import type { PlatformAddresses, SandboxEgressPolicy } from '@svc/contracts/egress';
import type { ArtifactRef, LayerRef, RuntimeKind, SandboxMetrics } from '@svc/contracts/node-agent';
import type { TeamLimits } from '@svc/contracts/teams';
import type { Owner } from '../teams/ownership.ts';
import type { VolumeMount } from '@svc/contracts/master';
import type { VolumeMountOnNode, VolumeRefFlip } from '@svc/contracts/volumes';

export interface ResolvedTemplate {
  templateId: string;
  alias?: string;
  artifact: ArtifactRef;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  /** The image's environment (ENV of its config), under the request's own env vars. */
  envVars?: Record<string, string>;
  /**
   * A snapshot's captured files: the sandbox starts from this layer, which its node downloads
   * when it lacks it; nodeId when only that node has it (a fork's capture).
   */
  layer?: { snapshotId: string; ref: LayerRef; nodeId?: string };
  /** A built template's start command: run once the sandbox is up; create answers when it is ready. */
  start?: { command: string; readyCommand?: string; user: string; cwd?: string };
  /** A built template's last USER and WORKDIR: whom commands that name none run as, and where. */
  defaultUser?: string;
  defaultWorkdir?: string;
  /** A snapshot's volume mounts, by volume id: a create that names none mounts these. */
  volumeMounts?: Array<{ volumeId: string; path: string; readOnly: boolean }>;
  /** Whose it is: a team starts sandboxes only from its own or public ones (docs/security.md). */
  owner?: Owner;
  /** The runtime its sandboxes run on when a create names none (absent: the node's default). */
  runtime?: RuntimeKind;
}

export interface TemplateResolver {
  /**
   * By id or alias. 404 (ErrorCodes.templateNotFound) when unknown, 400 when it has no ready
   * artifact. With `caller` (a team), another team's private template is the same 404, before
   * anything of its state is told (docs/security.md).
   */
  resolveForCreate(ref: string, caller?: string): Promise<ResolvedTemplate>;
  /** Template ids an id-or-alias filter stands for (list filter). */
  idsFor(ref: string): Promise<string[]>;
  /** A ready template artifact by id, as a node downloads it (a snapshot's template may have been rebuilt since). */
  artifactRef(artifactId: string): Promise<ArtifactRef>;
}

/** Sends sandboxes' egress policies to the egress proxy of their node (docs/egress.md). */
export interface EgressPolicies {
  /** Whether the node has an egress proxy to send policies to. */
  available(nodeId: string): Promise<boolean>;
  /** Replaces the sandbox's policy there; throws when the proxy cannot take it. */
  put(nodeId: string, policy: SandboxEgressPolicy): Promise<void>;
  /** Drops the sandbox's policy there; never throws (a failure is logged). */
  remove(nodeId: string, sandboxId: string): Promise<void>;
}

/**
 * Where the platform may connect for a user: a sandbox's egressProxy must not be one of the
 * platform's own endpoints or in a sandbox pool (events/webhook-target.ts); a 400 otherwise.
 */
export interface PlatformEndpointCheck {
  checkEndpoint(host: string, port: number, what: string): Promise<void>;
  /** The endpoints as addresses, and the pools: what the egress proxy never connects to. */
  platformAddresses(): Promise<PlatformAddresses>;
}

/** Tells data-plane proxies to drop what they cached about sandboxes. */
export interface ProxyCachePurger {
  purge(sandboxIds: string[]): Promise<void>;
}

/** A sandbox's stored metric samples within a range of unix seconds (start defaults to startedAt, ms). */
export interface SandboxMetricsHistory {
  range(sandboxId: string, startedAt: number, range: { start?: number; end?: number }): Promise<SandboxMetrics[]>;
}

/**
 * Where a sandbox's lifecycle events are kept and sent to webhooks (events/recorder.ts). Never
 * throws: the change it records is made, whatever becomes of the record.
 */
export interface SandboxEventLog {
  record(s: SandboxRow, type: SandboxEventType, data?: SandboxEventData, opts?: { buildId?: string }): Promise<void>;
}

/** A team's limits, for the quota checks (docs/security.md, "Quotas"). */
export interface TeamQuotas {
  limits(teamId: string): Promise<TeamLimits>;
}

/** The secrets vault, as sandbox create checks the placeholders of its rules. */
export interface SecretNames {
  /** The names among `names` that the team has no secret of. */
  missing(teamId: string, names: string[]): Promise<string[]>;
}

/** Persistent volumes, as sandboxes mount them (docs/volumes.md). */
export interface SandboxVolumes {
  /** A create's mounts resolved in the team (id, then name): 404 for a volume it has not. */
  resolveMounts(teamId: string, mounts: VolumeMount[]): Promise<Array<{ mount: VolumeMount & { volumeId: string }; onNode: VolumeMountOnNode }>>;
  /** The current records of a sandbox's recorded mounts (resume re-validates them): 404 for one deleted since. */
  current(recorded: Array<VolumeMount & { volumeId?: string }>, teamId: string): Promise<VolumeMountOnNode[]>;
  /** A node's count flips, from a create, destroy, pause or resume answer. */
  applyFlips(flips: VolumeRefFlip[] | undefined): Promise<void>;
  /**
   * Runs a node call that attaches the volumes with each claimed, so that a DELETE refuses until
   * it ends (409 for one marked deleting since it was read). Its flips are applied inside.
   */
  whileAttaching<T>(volumeIds: string[], attach: () => Promise<T>): Promise<T>;
}

/** A paused sandbox's state kept in the artifact store, as another node restores it. */
export interface StoredPause {
  snapshotId: string;
  /** The template artifact its layer lies over. */
  artifactId: string;
  /** Downloaded by the node that resumes it (contents 'memory' restores the machine). */
  layer: LayerRef;
}

/**
 * Pause packages (docs/cluster.md, "Cross-node restore"): a paused sandbox's state copied from
 * its node into the artifact store, so that another node resumes it when its own is lost or
 * drained.
 */
export interface PausePackages {
  /** Captures the paused sandbox on its node as it lies and stores it: the package, once ready. */
  store(sandbox: { sandboxId: string; nodeId: string; templateId: string; teamId: string; cpuCount: number; memoryMB: number; diskSizeMB: number }): Promise<StoredPause>;
  /** A ready package; undefined when there is none by that id. */
  get(snapshotId: string): Promise<StoredPause | undefined>;
  /** Removes a package from the store, its nodes and its record; failures are logged and swept later. */
  drop(snapshotId: string): Promise<void>;
}
