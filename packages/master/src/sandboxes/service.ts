import { randomUUID } from 'node:crypto';
import {
  badRequest, conflict, gone, newSandboxId, newToken, notFound, randomId, SvcError, unauthorized, unavailable, withLock,
  type Coordination, type Logger, type SvcConfig,
} from '@svc/common';
import { checkSignedFileRequest, fileSignatureProblem } from '@svc/common/envd-signature';
import type { EndedSandbox, NodeAgentClient, NodeSandbox, RuntimeKind, SandboxLogs } from '@svc/contracts/node-agent';
import type { SandboxLogSelection } from '@svc/contracts/sandbox-logs';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent, type SandboxEventKind } from '@svc/contracts/lifecycle';
import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import type { ConnectResult, CreateSandboxInput, ListSandboxesQuery, NetworkConfig, SandboxPage, SandboxRecord, VolumeMount } from '@svc/contracts/master';
import { parseNetworkUpdate } from './create-input.ts';
import { startAndWaitReady } from './start-command.ts';
import { placeSandbox, type Placed } from './placement.ts';
import type { DueSandbox, LifecycleReason, SandboxRoute, SandboxState, TerminateReason } from '@svc/contracts/master-internal';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { EgressPolicies, PausePackages, ProxyCachePurger, ResolvedTemplate, SandboxVolumes, SecretNames, TeamQuotas, TemplateResolver } from './ports.ts';
import { NODE_FEATURE_VOLUMES, type ExtInfo, type VolumeMountOnNode } from '@svc/contracts/volumes';
import { placeholderRefs } from '@svc/contracts/secrets';
import { SandboxQuota } from './quota.ts';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { usableBy } from '../teams/ownership.ts';
import { planEgress, type EgressPlan } from './egress-plan.ts';
import { toRecord, toRoute } from './record.ts';
import { DamagedRows } from './damaged-rows.ts';
import type { Row, SandboxRepo } from './repo.ts';
import * as T from './timeouts.ts';

const LOCK_TTL_MS = 120_000;
/** How long a resume that found its sandbox paused waits for the pause to let go of the lock. */
const RESUME_LOCK_WAIT_MS = 2_000;
const DELETE_TIMEOUT_MS = 30_000;
/** The longest a state change waits for the proxies to drop their cached route before it answers. */
const PURGE_WAIT_MS = 1_000;
/** The longest a connect or resume waits for a pause or resume under way to end. */
const SETTLE_WAIT_MS = 30_000;
const LIVE: SandboxState[] = ['running', 'pausing', 'paused', 'resuming', 'killing'];

export interface SandboxServiceDeps {
  cfg: SvcConfig;
  repo: SandboxRepo;
  nodes: NodeRegistry;
  templates: TemplateResolver;
  coordination: Coordination;
  proxies: ProxyCachePurger;
  egress: EgressPolicies;
  logger: Logger;
  /** Teams' limits; absent: no quotas (unit tests of other parts). */
  quotas?: TeamQuotas;
  /** Which secret names a team lacks; absent: no vault, so no secret placeholders. */
  secrets?: SecretNames;
  /** Persistent volumes; absent: none exist, so a create that mounts one fails with 404. */
  volumes?: SandboxVolumes;
  /** Pause packages in the artifact store (cross-node restore); absent: a paused sandbox stays on its node. */
  pausePackages?: PausePackages;
  /** How long a DELETE waits for the node before answering 408 (default 30 s). */
  deleteTimeoutMs?: number;
}

/** The sandbox state machine of docs/design.md, "Sandbox states", one lock per sandbox. */
export class SandboxService {
  private readonly holder = `master-${process.pid}-${randomId(6)}`;
  /** `node/sandbox` → when this master first saw the node run it with no record putting it there. */
  private readonly orphansSeen = new Map<string, number>();
  readonly damaged: DamagedRows;
  private readonly quota: SandboxQuota;
  constructor(private readonly d: SandboxServiceDeps) {
    this.damaged = new DamagedRows(d.logger);
    this.quota = new SandboxQuota(d.quotas, (teamId) => d.repo.teamUsage(teamId), d.coordination, d.logger);
  }

  /**
   * A create for `caller` (undefined: the operator, whose sandboxes are the default team's);
   * `resolved` when the caller already knows what it starts from (a fork).
   */
  async create(input: CreateSandboxInput, resolved?: ResolvedTemplate, caller?: string): Promise<SandboxRecord> {
    const tpl = resolved ?? await this.d.templates.resolveForCreate(input.template);
    // Another team's private template or snapshot is as unknown as a missing one (docs/security.md).
    if (tpl.owner && !usableBy(caller, tpl.owner)) throw notFound(`template ${input.template} not found`, 130404);
    const teamId = caller ?? DEFAULT_TEAM_ID;
    const cpuCount = input.cpuCount ?? tpl.cpuCount ?? this.d.cfg.svclet_conf.default_cpu_count;
    const memoryMB = input.memoryMB ?? tpl.memoryMB ?? this.d.cfg.svclet_conf.default_memory_mb;
    const release = await this.quota.admit(teamId, { memoryMB, cpuCount });
    try {
      return await this.createAdmitted(input, tpl, teamId, cpuCount, memoryMB);
    } finally {
      await release();
    }
  }

  private async createAdmitted(input: CreateSandboxInput, tpl: ResolvedTemplate, teamId: string, cpuCount: number, memoryMB: number): Promise<SandboxRecord> {
    // A snapshot's own mounts, unless the create names mounts of its own (docs/volumes.md).
    const asked = input.volumeMounts.length > 0 ? input.volumeMounts : (tpl.volumeMounts ?? []).map((m) => ({ name: m.volumeId, path: m.path, readOnly: m.readOnly }));
    if (asked.length > 0 && !this.d.volumes) throw notFound(`volume ${asked[0].name} not found`);
    const mounts = asked.length > 0 ? await this.d.volumes!.resolveMounts(teamId, asked) : [];
    const now = Date.now();
    const deadline = T.atCreate(now, input.timeout, this.d.cfg.svclet_conf.default_timeout_insec);
    const egress = planEgress(input.network, input.allowInternetAccess !== false);
    await this.checkPlaceholders(input.network, teamId, Object.keys(input.iam?.tokens ?? {}));
    const runtime = runtimeFor(input, tpl);
    const envVars = { ...tpl.envVars, ...input.envVars };
    const sandboxId = newSandboxId();
    // A private sandbox is always secure: its envd port is guarded by the envd access token.
    const secure = input.secure || !input.network.allowPublicTraffic;
    const envdAccessToken = secure ? newToken() : undefined;
    const trafficAccessToken = input.network.allowPublicTraffic ? undefined : randomUUID();
    const timeoutMs = this.d.cfg.master.create_timeout_insec * 1000;
    // A fork's capture is on the origin's node only: its sandboxes start there.
    const need = {
      memoryMB, cpuCount, ...(tpl.layer?.nodeId ? { onNode: tpl.layer.nodeId } : {}), ...(runtime ? { runtime } : {}),
      ...(input.nodeSelector ? { selector: input.nodeSelector } : {}),
    };
    const { nodeId, client, node } = await placeSandbox(this.placing(sandboxId), sandboxId, need, async (nodeId) => {
      if (egress.policy && !(await this.d.egress.available(nodeId))) {
        throw badRequest(`network rules and host names in allowOut need the egress proxy, and node ${nodeId} has none (egress.enabled is false there)`);
      }
      const volumes = await this.volumesFor(nodeId, mounts.map((m) => m.onNode));
      return {
        sandboxId, templateId: tpl.templateId, artifact: tpl.artifact, cpuCount, memoryMB, diskSizeMB: tpl.diskSizeMB,
        envVars, envdAccessToken, ...(tpl.layer ? { layer: tpl.layer.ref } : {}), allowInternetAccess: input.allowInternetAccess !== false,
        ...(tpl.defaultUser ? { defaultUser: tpl.defaultUser } : {}), ...(tpl.defaultWorkdir ? { defaultWorkdir: tpl.defaultWorkdir } : {}),
        network: { allowOut: input.network.allowOut, denyOut: input.network.denyOut, ...(egress.steer.length ? { steer: egress.steer } : {}) },
        metadata: input.metadata, timeoutMs, ...(volumes.length ? { volumes } : {}), ...(runtime ? { runtime } : {}),
      };
    }, timeoutMs);
    await this.d.volumes?.applyFlips(node.extInfo?.volumeRefFlips);
    // Before anything runs in it: until the proxy has the policy, it refuses the sandbox's requests.
    await this.pushEgress(nodeId, sandboxId, node.address, egress, teamId).catch((err) => {
      this.discardOnNode(client, nodeId, sandboxId, 'its egress policy could not be set');
      throw err;
    });
    if (tpl.start) {
      await startAndWaitReady(client, sandboxId, { ...tpl.start, envVars }).catch((err) => {
        this.dropEgress(nodeId, sandboxId, egress);
        this.discardOnNode(client, nodeId, sandboxId, 'its start command did not come up');
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
      await this.d.repo.insert(row);
    } catch (err) {
      // Atomic create: a sandbox that cannot be recorded must not keep running unseen.
      this.discardOnNode(client, nodeId, sandboxId, 'the master could not record it');
      this.dropEgress(nodeId, sandboxId, egress);
      this.d.logger.error({ sandboxId, nodeId, err }, 'sandbox started but could not be recorded; stopped it');
      throw unavailable(`sandbox could not be recorded (${(err as Error).message}); nothing was kept, retry`, 2);
    }
    this.emit('sandbox.created', sandboxId);
    return record;
  }

  private async pushEgress(nodeId: string, sandboxId: string, address: string, plan: EgressPlan, teamId: string): Promise<void> {
    if (plan.policy) await this.d.egress.put(nodeId, { sandboxId, address, teamId, ...plan.policy });
  }

  /**
   * Every `${e2b.secrets.NAME}` in the network rules names a secret of the team, and every
   * `${e2b.identity.tokens.NAME}` a token the sandbox registered: else 400 naming them, before
   * anything starts (docs/security.md). The egress proxy resolves them per request.
   */
  private async checkPlaceholders(network: NetworkConfig, teamId: string, tokenNames: string[]): Promise<void> {
    if (network.rules === undefined) return;
    const refs = { secrets: new Set<string>(), tokens: new Set<string>() };
    for (const s of stringsIn(network.rules)) {
      const r = placeholderRefs(s);
      r.secrets.forEach((n) => refs.secrets.add(n));
      r.tokens.forEach((n) => refs.tokens.add(n));
    }
    const unknownTokens = [...refs.tokens].filter((n) => !tokenNames.includes(n));
    if (unknownTokens.length) {
      throw badRequest(`network rules use workload tokens that the sandbox does not register in iam.tokens: ${unknownTokens.join(', ')}`);
    }
    if (refs.secrets.size === 0) return;
    if (!this.d.secrets) throw badRequest('network rules use ${e2b.secrets.…} placeholders, and this master has no secrets vault');
    const missing = await this.d.secrets.missing(teamId, [...refs.secrets]);
    if (missing.length) throw badRequest(`network rules use secrets the team does not have: ${missing.join(', ')} (create them with Secret.create or POST /secrets)`);
  }

  /** In the background; remove logs what fails. */
  private dropEgress(nodeId: string, sandboxId: string, plan: EgressPlan): void {
    if (plan.policy) void this.d.egress.remove(nodeId, sandboxId);
  }

  /** The egress plan of a recorded sandbox. */
  egressPlanOf(row: Row): EgressPlan {
    try {
      return planEgress(JSON.parse(row.network) as NetworkConfig, row.allow_internet_access === null || Number(row.allow_internet_access) !== 0);
    } catch (err) {
      // Recorded before its rules were checked: no policy the proxy would take, so none (its requests are refused).
      this.d.logger.warn({ sandboxId: row.sandbox_id, err: (err as Error).message }, 'a recorded sandbox\'s network rules do not pass the checks');
      return { steer: [] };
    }
  }

  /** The policies the egress proxy of a node enforces: its running sandboxes that have one. */
  async egressPolicies(nodeId: string): Promise<SandboxEgressPolicy[]> {
    // Only running ones: a paused sandbox's address may be another's by now, and its resume sends its policy again.
    const rows = (await this.d.repo.listByNode(nodeId)).filter((r) => r.state === 'running' || r.state === 'pausing');
    const out: SandboxEgressPolicy[] = [];
    for (const row of rows) {
      const plan = this.egressPlanOf(row);
      if (plan.policy) out.push({ sandboxId: row.sandbox_id, address: row.address, teamId: row.team_id, ...plan.policy });
    }
    return out;
  }

  /**
   * The volumes a node is sent: all of them where the agent supports volumes; none on an older
   * agent, where the mounts are a no-op and the create goes on (SPEC "Versioning" 2).
   */
  private async volumesFor(nodeId: string, volumes: VolumeMountOnNode[]): Promise<VolumeMountOnNode[]> {
    if (volumes.length === 0) return [];
    if ((await this.d.nodes.features(nodeId)).includes(NODE_FEATURE_VOLUMES)) return volumes;
    this.d.logger.warn({ nodeId, volumes: volumes.map((v) => v.volumeId) }, 'node agent without volume support: the sandbox starts without its volume mounts');
    return [];
  }

  /** What placeSandbox needs: the registry, and how to leave nothing on a node a create failed on. */
  private placing(sandboxId: string) {
    return { nodes: this.d.nodes, logger: this.d.logger, discard: (client: NodeAgentClient, nodeId: string, why: string) => this.discardOnNode(client, nodeId, sandboxId, why) };
  }

  /** A node's destroy, whose answer moves the volume counts. */
  private async deleteOnNode(client: { deleteSandbox(id: string, timeoutMs?: number): Promise<ExtInfo> }, sandboxId: string, timeoutMs?: number): Promise<void> {
    const ext = await client.deleteSandbox(sandboxId, timeoutMs);
    await this.d.volumes?.applyFlips(ext?.volumeRefFlips);
  }

  /** Removes a sandbox from its node in the background, logging what fails (create rollbacks). */
  private discardOnNode(client: { deleteSandbox(id: string, timeoutMs?: number): Promise<ExtInfo> }, nodeId: string, sandboxId: string, why: string): void {
    this.deleteOnNode(client, sandboxId).catch((err: SvcError) => {
      if (err.status === 404) return;
      this.d.logger.warn({ sandboxId, nodeId, why, err: err.message }, 'could not remove a sandbox after a failed create; the orphan sweep removes it later');
    });
  }

  /**
   * A running sandbox as a snapshot or fork needs it: its record, the environment it was created
   * with, and a client of its node. 409 when it is paused (connect to it first), 404/410 when gone.
   */
  async snapshotSource(id: string): Promise<{ record: SandboxRecord; envVars: Record<string, string>; network: NetworkConfig; volumeMounts: Array<VolumeMount & { volumeId?: string }>; node: NodeAgentClient }> {
    const row = await this.settled(id);
    if (row.state !== 'running') throw conflict(`sandbox ${id} is ${row.state}; a snapshot is taken of a running sandbox (connect to it first)`);
    return {
      record: toRecord(row),
      envVars: envOf(row),
      // With its inject secrets, which the record shows redacted: a fork enforces the same policy.
      network: JSON.parse(row.network) as NetworkConfig,
      // With their volume ids, which a snapshot keeps and a fork mounts again.
      volumeMounts: JSON.parse(row.volume_mounts) as Array<VolumeMount & { volumeId?: string }>,
      node: await this.d.nodes.client(row.node_id),
    };
  }

  async get(id: string): Promise<SandboxRecord> {
    const rec = this.damaged.read(await this.live(id));
    if (!rec) throw new SvcError(500, `the record of sandbox ${id} is damaged; the master's log and /notify/health say how`);
    return rec;
  }

  /** A team's sandboxes (undefined: every team's, the operator's view). */
  async list(q: ListSandboxesQuery, caller?: string): Promise<SandboxPage> {
    for (const k of ['metadata', 'template', 'nextToken', 'order', 'startedAfter', 'startedBefore'] as const) {
      if (q[k] !== undefined && typeof q[k] !== 'string') throw badRequest(`${k} must be given once`);
    }
    // A repeated ?state= arrives as a list; it means the same as a comma list.
    const states = parseStates(Array.isArray(q.state) ? q.state.join(',') : q.state);
    const limit = q.limit === undefined ? 100 : Number(q.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw badRequest('limit must be an integer from 1 to 1000');
    if (q.order !== undefined && q.order !== 'asc' && q.order !== 'desc') throw badRequest('order must be asc or desc');
    const order = q.order ?? 'desc';
    const startedAfter = parseInstant(q.startedAfter, 'startedAfter');
    const startedBefore = parseInstant(q.startedBefore, 'startedBefore');
    const filter = parseMetadataFilter(q.metadata);
    const templateIds = q.template ? await this.d.templates.idsFor(q.template) : undefined;
    let after = q.nextToken ? decodeToken(q.nextToken) : undefined;
    const query = { states, templateIds, order, startedAfter, startedBefore, teamId: caller } as const;
    const totalRunning = await this.d.repo.countRunning(caller);
    const out: SandboxRecord[] = [];
    // Metadata is JSON in a text column on three engines: filter here, page until the page is full.
    for (;;) {
      const rows = await this.d.repo.list({ ...query, after, limit: limit + 1 });
      for (const r of rows.slice(0, limit)) {
        if (out.length === limit) break;
        after = { startedAt: Number(r.started_at), id: r.sandbox_id };
        const rec = this.damaged.read(r);
        if (rec && filter.every(([k, v]) => rec.metadata[k] === v)) out.push(rec);
      }
      if (out.length === limit) {
        // A next page only when a sandbox that passes the filter follows: E2B's last page has no token.
        const more = filter.length === 0
          ? rows.length > limit || (await this.d.repo.list({ ...query, after, limit: 1 })).length > 0
          : await this.matchFollows({ ...query, after: after! }, filter);
        return { sandboxes: out, totalRunning, ...(more ? { nextToken: encodeToken(after!) } : {}) };
      }
      if (rows.length <= limit) return { sandboxes: out, totalRunning };
    }
  }

  /** Whether a row after the cursor passes the metadata filter (read a page at a time). */
  private async matchFollows(q: Omit<Parameters<SandboxRepo['list']>[0], 'limit'>, filter: Array<[string, string]>): Promise<boolean> {
    const page = 200;
    let after = q.after;
    for (;;) {
      const rows = await this.d.repo.list({ ...q, after, limit: page });
      for (const r of rows) {
        const rec = this.damaged.read(r);
        if (rec && filter.every(([k, v]) => rec.metadata[k] === v)) return true;
      }
      if (rows.length < page) return false;
      const last = rows[rows.length - 1];
      after = { startedAt: Number(last.started_at), id: last.sandbox_id };
    }
  }

  /** DELETE: synchronous; 503 + Retry-After while pausing or locked; 404 when unknown or already gone. */
  async kill(id: string, reason: TerminateReason = 'killed'): Promise<void> {
    const row = await this.d.repo.get(id);
    if (!row || row.state === 'terminated') throw notFound(`sandbox ${id} not found`);
    if (row.state === 'pausing' || row.state === 'resuming' || row.state === 'killing') {
      throw unavailable(`sandbox ${id} is ${row.state}; retry the delete`, 2);
    }
    await this.locked(id, () => unavailable(`sandbox ${id} is busy with another lifecycle operation; retry the delete`, 2), async () => {
      const cur = await this.d.repo.get(id);
      if (!cur || cur.state === 'terminated') throw notFound(`sandbox ${id} not found`);
      if (reason === 'timeout') assertStillDue(cur);
      if (!(await this.d.repo.transition(id, ['running', 'paused'], { state: 'killing' }))) {
        throw unavailable(`sandbox ${id} is ${cur.state}; retry the delete`, 2);
      }
      try {
        const client = await this.d.nodes.client(cur.node_id);
        await this.deleteOnNode(client, id, this.d.deleteTimeoutMs ?? DELETE_TIMEOUT_MS);
      } catch (err) {
        const e = err as SvcError;
        if (e.status === 504) {
          await this.d.repo.transition(id, ['killing'], { state: cur.state });
          throw new SvcError(408, `sandbox ${id} did not stop within ${(this.d.deleteTimeoutMs ?? DELETE_TIMEOUT_MS) / 1000} s`);
        }
        // 404: already gone on the node. Unreachable node: it removes orphans when it registers again.
        if (e.status !== 404) this.d.logger.warn({ sandboxId: id, err: e.message }, 'node delete failed; marking terminated');
      }
      await this.d.repo.update(id, { state: 'terminated', terminated_at: Date.now(), terminate_reason: reason, end_at: null, pause_snapshot_id: null });
      this.dropEgress(cur.node_id, id, this.egressPlanOf(cur));
      void this.dropPausePackage(id, cur.pause_snapshot_id);
    });
    if (reason === 'timeout') this.d.logger.info({ sandboxId: id }, 'sandbox timed out and was killed');
    await this.changed('sandbox.killed', id, reason);
  }

  /**
   * memory false (or, at the idle timeout, a sandbox created with autoPauseMemory false): a
   * filesystem pause, which frees the memory and keeps the files; connect boots it again.
   */
  async pause(id: string, reason: LifecycleReason = 'api', opts: { memory?: boolean; store?: boolean } = {}): Promise<SandboxRecord> {
    const row = await this.live(id);
    const keepMemory = opts.memory ?? (reason === 'timeout' ? Number(row.auto_pause_memory) !== 0 : true);
    if (row.state === 'paused') throw conflict(`sandbox ${id} is already paused`);
    if (row.state !== 'running') throw conflict(`sandbox ${id} is ${row.state}; retry later`);
    const out = await this.locked(id, () => conflict(`sandbox ${id} is busy with another lifecycle operation; retry later`), async () => {
      if (reason === 'timeout') assertStillDue((await this.d.repo.get(id))!);
      if (!(await this.d.repo.transition(id, ['running'], { state: 'pausing' }))) {
        const cur = await this.live(id);
        throw conflict(cur.state === 'paused' ? `sandbox ${id} is already paused` : `sandbox ${id} is ${cur.state}; retry later`);
      }
      try {
        const node = await (await this.d.nodes.client(row.node_id)).pauseSandbox(id, keepMemory ? {} : { memory: false });
        const pauseKind = node.pauseKind ?? 'freeze';
        // Stored while the row still says pausing: a connect waits for the package to be whole.
        const stored = await this.storePause(row, pauseKind, opts.store === true);
        await this.d.repo.update(id, { state: 'paused', pause_kind: pauseKind, pause_snapshot_id: stored ?? null });
        await this.d.volumes?.applyFlips(node.extInfo?.volumeRefFlips);
      } catch (err) {
        await this.d.repo.transition(id, ['pausing'], { state: 'running' });
        throw passThrough(err, `pause of sandbox ${id} failed`);
      }
      return toRecord((await this.d.repo.get(id))!);
    });
    await this.changed('sandbox.paused', id, reason);
    return out;
  }

  /**
   * Copies a paused sandbox's state into the artifact store when master.pause_to_store says so
   * (or `force`, a drain): its package id, or undefined (a frozen sandbox has none; a failure is
   * logged and leaves the sandbox paused on its node alone).
   */
  private async storePause(row: Row, pauseKind: string, force: boolean): Promise<string | undefined> {
    if (!this.d.pausePackages || pauseKind === 'freeze') return undefined;
    const policy = this.d.cfg.master.pause_to_store;
    if (!force && (policy === 'never' || (policy === 'auto' && (await this.d.nodes.count()) < 2))) return undefined;
    try {
      const stored = await this.d.pausePackages.store({
        sandboxId: row.sandbox_id, nodeId: row.node_id, templateId: row.template_id, teamId: row.team_id,
        cpuCount: Number(row.cpu_count), memoryMB: Number(row.memory_mb), diskSizeMB: Number(row.disk_size_mb),
      });
      return stored.snapshotId;
    } catch (err) {
      this.d.logger.warn({ sandboxId: row.sandbox_id, nodeId: row.node_id, err: (err as Error).message }, 'pause package not stored: the sandbox resumes only on its own node');
      return undefined;
    }
  }

  /**
   * Stores the package of a sandbox already paused without one (a drain): 409 when it is not
   * paused, or paused by freezing (which cannot be captured).
   */
  async storePausePackage(id: string): Promise<void> {
    await this.locked(id, () => conflict(`sandbox ${id} is busy with another lifecycle operation; retry later`), async () => {
      const row = await this.live(id);
      if (row.state !== 'paused') throw conflict(`sandbox ${id} is ${row.state}, not paused`);
      if (row.pause_snapshot_id) return;
      if (row.pause_kind === 'freeze') throw conflict(`sandbox ${id} is paused by freezing, which cannot be captured`);
      const stored = await this.storePause(row, row.pause_kind ?? 'freeze', true);
      if (!stored) throw unavailable(`the pause package of sandbox ${id} could not be stored (the master's log says why)`, 5);
      if (!(await this.d.repo.transition(id, ['paused'], { pause_snapshot_id: stored }))) await this.dropPausePackage(id, stored);
    }, RESUME_LOCK_WAIT_MS);
  }

  /** In the background: a package its sandbox no longer needs (it runs again, or was killed). */
  private dropPausePackage(sandboxId: string, snapshotId: string | null): Promise<void> {
    if (!snapshotId || !this.d.pausePackages) return Promise.resolve();
    return this.d.pausePackages.drop(snapshotId).catch((err: Error) => {
      this.d.logger.warn({ sandboxId, snapshotId, err: err.message }, 'pause package not dropped; the stale package sweep removes it');
    });
  }

  /** connect(timeout): resumes a paused sandbox; 200 when it was running, 201 when it resumed. */
  async connect(id: string, timeout: number | undefined, opts: { memory?: boolean } = {}): Promise<ConnectResult> {
    if (timeout !== undefined && timeout !== null) T.atConnect(Date.now(), { timeoutSec: -1, endAt: null }, timeout, false);
    const row = await this.settled(id);
    if (row.state === 'running') {
      const d = T.atConnect(Date.now(), deadlineOf(row), timeout, false);
      await this.d.repo.update(id, { timeout_sec: d.timeoutSec, end_at: d.endAt });
      return { resumed: false, sandbox: toRecord((await this.d.repo.get(id))!) };
    }
    const sandbox = await this.resumeRow(row, 'connect', (now, cur) => T.atConnect(now, cur, timeout, true), opts);
    return { resumed: true, sandbox };
  }

  /** Deprecated resume(timeout). */
  async resume(id: string, timeout: number | undefined, opts: { memory?: boolean } = {}): Promise<SandboxRecord> {
    if (timeout !== undefined && timeout !== null) T.atResume(Date.now(), { timeoutSec: -1, endAt: null }, timeout);
    const row = await this.settled(id);
    if (row.state === 'running') throw conflict(`sandbox ${id} is already running`);
    return this.resumeRow(row, 'api', (now, cur) => T.atResume(now, cur, timeout), opts);
  }

  /** A drain's move: the paused sandbox resumes (on another node when its package is stored); its idle clock restarts. */
  async resumeMoved(id: string): Promise<SandboxRecord> {
    const row = await this.settled(id);
    if (row.state === 'running') return toRecord(row);
    return this.resumeRow(row, 'drain', T.restartWindow);
  }

  /** Auto-resume from the lifecycle manager: the idle clock restarts with the same length. */
  async resumeForTraffic(id: string, reason: LifecycleReason): Promise<SandboxRoute> {
    const row = await this.settled(id);
    if (row.state === 'running') return toRoute(row);
    if (row.pause_kind === 'filesystem') throw conflict(`sandbox ${id} was paused without its memory; traffic does not resume it, connect does`);
    await this.resumeRow(row, reason, T.restartWindow);
    return toRoute((await this.d.repo.get(id))!);
  }

  private async resumeRow(row: Row, reason: LifecycleReason, nextDeadline: (now: number, cur: T.Deadline) => T.Deadline, opts: { memory?: boolean } = {}): Promise<SandboxRecord> {
    const id = row.sandbox_id;
    if (row.state !== 'paused') throw conflict(`sandbox ${id} is ${row.state}; another lifecycle operation is settling, retry later`);
    // A paused sandbox holds no place in its team's quota; resuming takes one again.
    const release = await this.quota.admit(row.team_id, { memoryMB: row.memory_mb, cpuCount: row.cpu_count });
    const out = await this.locked(id, () => conflict(`sandbox ${id} is busy with another lifecycle operation; retry later`), async () => {
      if (!(await this.d.repo.transition(id, ['paused'], { state: 'resuming' }))) {
        const cur = await this.live(id);
        throw conflict(`sandbox ${id} is ${cur.state}; another lifecycle operation is settling, retry later`);
      }
      // Read again under the lock: a drain may have stored its package since.
      const cur = (await this.d.repo.get(id))!;
      const standing = await this.d.nodes.standing(cur.node_id);
      if (standing !== 'ready' && cur.pause_snapshot_id && this.d.pausePackages) return this.moveAndResume(cur, standing, nextDeadline);
      if (standing === 'lost') {
        await this.d.repo.transition(id, ['resuming'], { state: 'paused' });
        throw unavailable(`sandbox ${id} is paused on node ${cur.node_id}, which is not answering, and its state is not in the artifact store; it resumes when the node returns`, 5);
      }
      let node: NodeSandbox;
      try {
        // A sandbox that boots again from its files is given its identity anew (the node keeps no secrets).
        const boots = cur.pause_kind === 'filesystem' || opts.memory === false;
        // Its volumes attach again at the boot: their current records, re-validated (404 for one deleted since).
        const volumes = boots ? await this.recordedVolumes(cur, cur.node_id) : [];
        node = await (await this.d.nodes.client(cur.node_id)).resumeSandbox(id, boots ? {
          ...(opts.memory === false ? { memory: false } : {}),
          envVars: envOf(cur),
          ...(cur.envd_access_token ? { envdAccessToken: cur.envd_access_token } : {}),
          ...(volumes.length ? { volumes } : {}),
        } : {});
        await this.d.volumes?.applyFlips(node.extInfo?.volumeRefFlips);
      } catch (err) {
        await this.d.repo.transition(id, ['resuming'], { state: 'paused' });
        throw passThrough(err, `resume of sandbox ${id} failed`);
      }
      const d = nextDeadline(Date.now(), deadlineOf(cur));
      await this.d.repo.update(id, { state: 'running', pause_kind: null, pause_snapshot_id: null, address: node.address, timeout_sec: d.timeoutSec, end_at: d.endAt });
      void this.dropPausePackage(id, cur.pause_snapshot_id);
      // A sandbox that booted again may have a new address; the proxy finds it by its address.
      await this.pushEgress(cur.node_id, id, node.address, this.egressPlanOf(cur), cur.team_id).catch((err: Error) => {
        this.d.logger.error({ sandboxId: id, err: err.message }, 'resumed sandbox\'s egress policy could not be set; the proxy refuses its requests until the policy is set again');
      });
      return toRecord((await this.d.repo.get(id))!);
    }, RESUME_LOCK_WAIT_MS).finally(release);
    await this.changed('sandbox.resumed', id, reason);
    return out;
  }

  /**
   * Cross-node restore (docs/cluster.md): a paused sandbox whose node is lost or drained starts
   * on another node from its package in the artifact store, under the same id, tokens and
   * settings; the node it left removes its copy (now, when draining; when it returns, if lost).
   * Called under the lock with the row in 'resuming'.
   */
  private async moveAndResume(cur: Row, standing: 'draining' | 'lost', nextDeadline: (now: number, cur: T.Deadline) => T.Deadline): Promise<SandboxRecord> {
    const id = cur.sandbox_id;
    const plan = this.egressPlanOf(cur);
    let placed: Placed;
    try {
      const pkg = await this.d.pausePackages!.get(cur.pause_snapshot_id!);
      if (!pkg) throw unavailable(`the stored state of sandbox ${id} is gone; it resumes when node ${cur.node_id} takes it again`, 5);
      const artifact = await this.d.templates.artifactRef(pkg.artifactId);
      // A boot from files runs as the template says; a deleted template leaves envd's defaults.
      const tpl = await this.d.templates.resolveForCreate(cur.template_id).catch(() => undefined);
      const network = JSON.parse(cur.network) as NetworkConfig;
      const need = {
        memoryMB: Number(cur.memory_mb), cpuCount: Number(cur.cpu_count), runtime: cur.runtime as RuntimeKind, exclude: [cur.node_id],
        ...(cur.node_selector ? { selector: JSON.parse(cur.node_selector) as Record<string, string> } : {}),
      };
      placed = await placeSandbox(this.placing(id), id, need, async (nodeId) => {
        if (plan.policy && !(await this.d.egress.available(nodeId))) throw badRequest(`sandbox ${id} has network rules, which need the egress proxy, and node ${nodeId} has none`);
        const volumes = await this.recordedVolumes(cur, nodeId);
        return {
          sandboxId: id, templateId: cur.template_id, artifact, cpuCount: Number(cur.cpu_count), memoryMB: Number(cur.memory_mb), diskSizeMB: Number(cur.disk_size_mb),
          envVars: envOf(cur), ...(cur.envd_access_token ? { envdAccessToken: cur.envd_access_token } : {}), layer: pkg.layer,
          allowInternetAccess: cur.allow_internet_access === null || Number(cur.allow_internet_access) !== 0,
          ...(tpl?.defaultUser ? { defaultUser: tpl.defaultUser } : {}), ...(tpl?.defaultWorkdir ? { defaultWorkdir: tpl.defaultWorkdir } : {}),
          network: { allowOut: network.allowOut ?? [], denyOut: network.denyOut ?? [], ...(plan.steer.length ? { steer: plan.steer } : {}) },
          metadata: JSON.parse(cur.metadata) as Record<string, string>, timeoutMs: this.d.cfg.master.create_timeout_insec * 1000,
          ...(volumes.length ? { volumes } : {}), runtime: cur.runtime as RuntimeKind,
        };
      }, this.d.cfg.master.create_timeout_insec * 1000);
      await this.d.volumes?.applyFlips(placed.node.extInfo?.volumeRefFlips);
    } catch (err) {
      await this.d.repo.transition(id, ['resuming'], { state: 'paused' });
      throw passThrough(err, `resume of sandbox ${id} on another node failed`);
    }
    const d = nextDeadline(Date.now(), deadlineOf(cur));
    await this.d.repo.update(id, {
      state: 'running', pause_kind: null, pause_snapshot_id: null, node_id: placed.nodeId, address: placed.node.address,
      envd_port: placed.node.envdPort, envd_version: placed.node.envdVersion, runtime: placed.node.runtime, timeout_sec: d.timeoutSec, end_at: d.endAt,
    });
    this.d.logger.info({ sandboxId: id, from: cur.node_id, to: placed.nodeId, why: standing }, 'paused sandbox resumed on another node');
    void this.dropPausePackage(id, cur.pause_snapshot_id);
    this.dropEgress(cur.node_id, id, plan);
    await this.pushEgress(placed.nodeId, id, placed.node.address, plan, cur.team_id).catch((err: Error) => {
      this.d.logger.error({ sandboxId: id, err: err.message }, 'moved sandbox\'s egress policy could not be set; the proxy refuses its requests until the policy is set again');
    });
    // A drained node still answers: its copy goes now. A lost one removes it when it returns (reconcileNode).
    if (standing === 'draining') this.discardOnNode(await this.d.nodes.client(cur.node_id), cur.node_id, id, 'it moved to another node');
    return toRecord((await this.d.repo.get(id))!);
  }

  /** The current records of a sandbox's volumes, for a boot on `nodeId` that attaches them again. */
  private async recordedVolumes(row: Row, nodeId: string): Promise<VolumeMountOnNode[]> {
    const recorded = JSON.parse(row.volume_mounts) as Array<VolumeMount & { volumeId?: string }>;
    if (recorded.length === 0 || !this.d.volumes) return [];
    if (!(await this.d.nodes.features(nodeId)).includes(NODE_FEATURE_VOLUMES)) return [];
    return this.d.volumes.current(recorded, row.team_id);
  }

  /** Kills every sandbox of a team, running or paused (E2B's admin kill). */
  async killTeam(teamId: string): Promise<{ killedCount: number; failedCount: number }> {
    const out = { killedCount: 0, failedCount: 0 };
    const failed = new Set<string>();
    for (;;) {
      const rows = await this.d.repo.list({ states: ['running', 'paused'], teamId, limit: 100 });
      const batch = rows.filter((r) => !failed.has(r.sandbox_id));
      if (batch.length === 0) break;
      for (const r of batch) {
        try {
          await this.kill(r.sandbox_id, 'killed');
          out.killedCount++;
        } catch (err) {
          this.d.logger.warn({ sandboxId: r.sandbox_id, teamId, err: (err as Error).message }, 'team-wide kill: a sandbox could not be killed');
          failed.add(r.sandbox_id);
          out.failedCount++;
        }
      }
    }
    return out;
  }

  async setTimeout(id: string, timeout: unknown): Promise<SandboxRecord> {
    const d = T.atSetTimeout(Date.now(), timeout);
    await this.live(id);
    await this.d.repo.update(id, { timeout_sec: d.timeoutSec, end_at: d.endAt });
    return toRecord((await this.d.repo.get(id))!);
  }

  async refresh(id: string, duration: unknown): Promise<SandboxRecord> {
    const row = await this.live(id);
    const d = T.atRefresh(Date.now(), deadlineOf(row), duration);
    await this.d.repo.update(id, { end_at: d.endAt });
    return toRecord((await this.d.repo.get(id))!);
  }

  /** E2B's updateNetwork: a running sandbox's whole egress configuration, replaced. */
  async updateNetwork(id: string, body: unknown): Promise<SandboxRecord> {
    const u = parseNetworkUpdate(body);
    // An unknown id is a 404 before any lock is named after it (a lock name has a length limit).
    await this.live(id);
    return this.locked(id, () => conflict(`sandbox ${id} is busy with another lifecycle operation; retry`), async () => {
      const row = await this.live(id);
      if (row.state !== 'running') throw conflict(`sandbox ${id} is ${row.state}; its network can change only while it runs`);
      const current = JSON.parse(row.network) as NetworkConfig;
      const network: NetworkConfig = { ...current, allowOut: u.allowOut, denyOut: u.denyOut };
      if (u.rules === undefined) delete network.rules; else network.rules = u.rules;
      const before = this.egressPlanOf(row);
      const plan = planEgress(network, u.allowInternetAccess ?? true);
      if (plan.policy && !(await this.d.egress.available(row.node_id))) {
        throw badRequest(`network rules and host names in allowOut need the egress proxy, and node ${row.node_id} has none`);
      }
      // The policy first: traffic steered by the new rules finds it there.
      await this.checkPlaceholders(network, row.team_id, iamNamesOf(row));
      await this.pushEgress(row.node_id, id, row.address, plan, row.team_id);
      const node = await this.d.nodes.client(row.node_id);
      await node.updateNetwork(id, {
        allowInternetAccess: u.allowInternetAccess ?? true,
        network: { allowOut: u.allowOut, denyOut: u.denyOut, ...(plan.steer.length ? { steer: plan.steer } : {}) },
      });
      if (before.policy && !plan.policy) await this.d.egress.remove(row.node_id, id);
      await this.d.repo.update(id, {
        network: JSON.stringify(network),
        allow_internet_access: u.allowInternetAccess === undefined ? null : u.allowInternetAccess ? 1 : 0,
      });
      return toRecord((await this.d.repo.get(id))!);
    });
  }

  /** The sandbox's metrics now, when now lies in the range of unix seconds asked for. */
  async metrics(id: string, range: { start?: unknown; end?: unknown } = {}) {
    const start = parseUnixSeconds(range.start, 'start');
    const end = parseUnixSeconds(range.end, 'end');
    if (start !== undefined && end !== undefined && start > end) throw badRequest('start must not be after end');
    const row = await this.live(id);
    if (row.state !== 'running' && row.state !== 'paused') return [];
    const now = Date.now() / 1000;
    // A sample is taken now: a range that ends before now, or starts after it, holds none.
    if ((end !== undefined && end < Math.floor(now)) || (start !== undefined && start > Math.ceil(now))) return [];
    const sample = await (await this.d.nodes.client(row.node_id)).metrics(id);
    const inRange = (start === undefined || sample.timestampUnix >= start) && (end === undefined || sample.timestampUnix <= end);
    return inRange ? [sample] : [];
  }

  /** The sandbox's own log, as its node keeps it (running or paused). */
  async logs(id: string, q: SandboxLogSelection): Promise<SandboxLogs> {
    const row = await this.live(id);
    return (await this.d.nodes.client(row.node_id)).sandboxLogs(id, q);
  }

  async route(id: string): Promise<SandboxRoute> {
    const row = await this.d.repo.get(id);
    if (!row) throw notFound(`sandbox ${id} not found`);
    return toRoute(row);
  }

  /**
   * Which live sandbox's envd access token produced a file URL's signature: one hash per secured
   * sandbox, compared in constant time (docs/benchmarks.md, signed URL look-up). The caller
   * still checks the signature against that sandbox, expiry included.
   */
  async routeBySignature(body: unknown): Promise<SandboxRoute> {
    const signed = checkSignedFileRequest(body);
    for (const c of await this.d.repo.envdTokens()) {
      if (fileSignatureProblem(signed, c.token, 0) === undefined) return this.route(c.sandboxId);
    }
    throw unauthorized('invalid signature: no sandbox signed this file URL');
  }

  async activity(ids: unknown): Promise<void> {
    if (!Array.isArray(ids)) throw badRequest('sandboxIds must be a list');
    const clean = ids.filter((x): x is string => typeof x === 'string').slice(0, 10_000);
    await this.d.repo.touch(clean, Date.now());
  }

  async due(): Promise<DueSandbox[]> {
    const rows = await this.d.repo.due(Date.now());
    const out: DueSandbox[] = [];
    for (const r of rows) {
      const rec = this.damaged.read(r);
      if (rec) out.push({ sandboxId: rec.sandboxId, state: rec.state, onTimeout: rec.lifecycle.onTimeout, endAt: rec.endAt! });
    }
    return out;
  }

  /**
   * Brings the records of one node in line with what it really runs: sandboxes it runs that
   * are gone here are removed there; sandboxes recorded here that it lost are terminated.
   */
  async reconcileNode(nodeId: string): Promise<void> {
    const client = await this.d.nodes.client(nodeId);
    const onNode = new Map((await client.listSandboxes()).map((s) => [s.sandboxId, s]));
    const rows = await this.d.repo.listByNode(nodeId);
    const known = new Set(rows.map((r) => r.sandbox_id));
    for (const [id] of onNode) {
      if (!known.has(id)) {
        this.d.logger.info({ sandboxId: id, nodeId }, 'removing sandbox the master does not know');
        await this.deleteOnNode(client, id).catch((err: Error) => this.d.logger.warn({ sandboxId: id, nodeId, err: err.message }, 'reconcile: could not remove a sandbox the master does not know; the next reconcile tries again'));
      }
    }
    let endedOnNode: Promise<Map<string, EndedSandbox>> | undefined;
    for (const r of rows) {
      const s = onNode.get(r.sandbox_id);
      if (!s) {
        endedOnNode ??= client.listEndedSandboxes().then((l) => new Map(l.map((e) => [e.sandboxId, e])), (err: Error) => {
          this.d.logger.warn({ nodeId, err: err.message }, 'node did not say why its sandboxes ended');
          return new Map<string, EndedSandbox>();
        });
        await this.markEnded(r, terminateReasonOf((await endedOnNode).get(r.sandbox_id)));
      } else if (r.state !== s.state && (r.state === 'pausing' || r.state === 'resuming')) {
        await this.d.repo.update(r.sandbox_id, { state: s.state, pause_kind: s.state === 'paused' ? s.pauseKind ?? 'freeze' : null });
      } else if (r.state === 'killing') {
        await this.deleteOnNode(client, r.sandbox_id).catch((err: Error) => this.d.logger.warn({ sandboxId: r.sandbox_id, nodeId, err: err.message }, 'reconcile: could not remove a killed sandbox from its node; the next reconcile tries again'));
        await this.d.repo.update(r.sandbox_id, { state: 'terminated', terminated_at: Date.now(), terminate_reason: 'killed', end_at: null });
      }
    }
  }

  /**
   * Node loss (docs/cluster.md): a node silent for master.node_lost_after_sec has its running
   * sandboxes (and those mid-operation) terminated here with reason node_lost, so the API never
   * shows them running. Paused ones stay paused: their state is on the node's disk, and they
   * resume when it returns. A returning node removes what was terminated (reconcileNode).
   */
  async sweepLostNodes(): Promise<void> {
    const silentMs = this.d.cfg.master.node_lost_after_sec * 1000;
    for (const { nodeId, lastHeartbeatAt } of await this.d.nodes.silentNodes(silentMs)) {
      for (const r of await this.d.repo.listByNode(nodeId)) {
        if (r.state === 'paused') continue;
        // A paused sandbox moving off the lost node from its package (moveAndResume) is not lost.
        if (r.state === 'resuming' && r.pause_snapshot_id) {
          await this.settleAbandonedMove(r);
          continue;
        }
        this.d.logger.warn({ sandboxId: r.sandbox_id, nodeId, state: r.state, silentSinceMs: Date.now() - lastHeartbeatAt }, 'sandbox lost with its node');
        await this.markEnded(r, 'node_lost');
      }
    }
  }

  /**
   * A move whose lock is free has no one doing it: a master stopped in the middle. The sandbox
   * goes back to paused with its package, and the next resume moves it again; whatever the
   * stopped move started on another node is removed by the orphan sweep (removeOrphans).
   */
  private async settleAbandonedMove(r: Row): Promise<void> {
    await this.whenFree(r.sandbox_id, async () => {
      if (await this.d.repo.transition(r.sandbox_id, ['resuming'], { state: 'paused' })) {
        this.d.logger.warn({ sandboxId: r.sandbox_id, nodeId: r.node_id }, 'a move to another node was abandoned midway; the sandbox is paused again with its stored state');
      }
    });
  }

  /**
   * Orphans (docs/cluster.md, "Orphans"): sandboxes a node runs that no record here puts there,
   * because a master stopped between a node's create and its record, a move was abandoned, a
   * rollback's removal failed, or the node came back from a partition after its sandboxes were
   * reported lost. One goes once this master has seen it unrecorded for `graceMs` (on its own
   * clock, not the node's), so a create or move under way (recorded once its node has the
   * sandbox) is never touched; and only while no one holds the sandbox's lock.
   */
  async removeOrphans(nodeId: string, graceMs: number): Promise<string[]> {
    const client = await this.d.nodes.client(nodeId);
    const now = Date.now();
    const removed: string[] = [];
    const ours = (r: Row | undefined) => !!r && r.node_id === nodeId && r.state !== 'terminated';
    const seen = new Map<string, number>();
    // One read of the node's records; a sandbox recorded since is first seen now, so its grace covers it.
    const recorded = new Set((await this.d.repo.listByNode(nodeId)).map((r) => r.sandbox_id));
    for (const s of await client.listSandboxes()) {
      if (recorded.has(s.sandboxId)) continue;
      const key = `${nodeId}/${s.sandboxId}`;
      const since = this.orphansSeen.get(key) ?? now;
      seen.set(key, since);
      if (now - since < graceMs) continue;
      await this.whenFree(s.sandboxId, async () => {
        const r = await this.d.repo.get(s.sandboxId);
        if (ours(r)) return;
        this.d.logger.warn({ sandboxId: s.sandboxId, nodeId, unrecordedSinceMs: now - since, recorded: r ? { nodeId: r.node_id, state: r.state } : null }, 'removing a sandbox its node runs and no record here puts there');
        await this.deleteOnNode(client, s.sandboxId).then(() => { removed.push(s.sandboxId); seen.delete(key); }, (err: Error) => {
          this.d.logger.warn({ sandboxId: s.sandboxId, nodeId, err: err.message }, 'orphan sweep: could not remove the sandbox; the next sweep tries again');
        });
      });
    }
    for (const key of this.orphansSeen.keys()) if (key.startsWith(`${nodeId}/`)) this.orphansSeen.delete(key);
    for (const [key, since] of seen) this.orphansSeen.set(key, since);
    return removed;
  }

  /** Sandboxes a node reports as ended on their own (heartbeat): terminated here with the node's reason. */
  async recordEnded(nodeId: string, ended: EndedSandbox[]): Promise<void> {
    for (const e of ended.slice(0, 1_000)) {
      const row = await this.d.repo.get(e.sandboxId);
      if (!row || row.node_id !== nodeId || row.state === 'terminated' || row.state === 'killing') continue;
      const reason = terminateReasonOf(e);
      this.d.logger.info({ sandboxId: e.sandboxId, nodeId, reason, message: e.message }, 'sandbox ended on its node');
      await this.markEnded(row, reason);
    }
  }

  /** A sandbox its node no longer runs (its row as the caller read it): terminated here, with the reason, and announced. */
  private async markEnded(row: Row, reason: TerminateReason): Promise<void> {
    const id = row.sandbox_id;
    await this.d.repo.update(id, { state: 'terminated', terminated_at: Date.now(), terminate_reason: reason, end_at: null, pause_snapshot_id: null });
    void this.dropPausePackage(id, row.pause_snapshot_id);
    await this.changed('sandbox.killed', id, reason);
  }

  /**
   * The live row once no pause or resume is under way: a sandbox the API already shows as paused
   * may still be pausing, and a connect right then should resume it, not fail (seen with E2B's
   * Python SDK polling getInfo, then connecting). Waits at most SETTLE_WAIT_MS.
   */
  private async settled(id: string): Promise<Row> {
    const deadline = Date.now() + SETTLE_WAIT_MS;
    for (;;) {
      const row = await this.live(id);
      if (row.state !== 'pausing' && row.state !== 'resuming') return row;
      if (Date.now() > deadline) throw conflict(`sandbox ${id} is still ${row.state} after ${SETTLE_WAIT_MS / 1000} s; retry later`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** A live (non-terminated) row: 404 when unknown, 410 when it was killed or timed out. */
  private async live(id: string): Promise<Row> {
    const row = await this.d.repo.get(id);
    if (!row) throw notFound(`sandbox ${id} not found`);
    if (row.state === 'terminated') {
      if (row.terminate_reason === 'oom') throw gone(`sandbox ${id} ran out of memory and was stopped by its host`);
      if (row.terminate_reason === 'node_lost') throw gone(`sandbox ${id} was lost with its node ${row.node_id}, which stopped answering`);
      throw gone(row.terminate_reason === 'timeout' ? `sandbox ${id} timed out and was killed` : `sandbox ${id} was killed`);
    }
    return row;
  }

  /**
   * Runs fn holding the sandbox's lifecycle lock; busy() when another holder has it. With waitMs,
   * the lock is retried that long first: an operation writes its settled state just before it
   * unlocks, so a caller that waited for the state can otherwise find the lock still held.
   */
  private async locked<V>(id: string, busy: () => SvcError, fn: () => Promise<V>, waitMs = 0): Promise<V> {
    const name = `sbx:${id}`;
    const deadline = Date.now() + waitMs;
    while (!(await this.d.coordination.tryLock(name, this.holder, LOCK_TTL_MS))) {
      if (Date.now() >= deadline) throw busy();
      await new Promise((r) => setTimeout(r, 25));
    }
    try {
      return await fn();
    } finally {
      await this.d.coordination.unlock(name, this.holder).catch(() => { /* the lock expires with its TTL: a failed unlock only delays the next operation */ });
    }
  }

  /** Runs fn holding the sandbox's lifecycle lock if no one holds it now; a sweep skips a busy sandbox. */
  private async whenFree(id: string, fn: () => Promise<void>): Promise<void> {
    await withLock(this.d.coordination, `sbx:${id}`, this.holder, LOCK_TTL_MS, fn);
  }

  /**
   * A sandbox changed state: announced on the bus, and purged from every announced proxy's cache
   * over its admin route before the caller answers, so the next request through any proxy sees
   * the change (docs/design.md, "Events and caches"). A proxy slower than PURGE_WAIT_MS is not
   * waited for: its purge still lands, a moment later.
   */
  private async changed(kind: Exclude<SandboxEventKind, 'sandbox.created'>, sandboxId: string, reason?: string): Promise<void> {
    this.emit(kind, sandboxId, reason);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.d.proxies.purge([sandboxId]), new Promise((r) => { timer = setTimeout(r, PURGE_WAIT_MS); })]);
    clearTimeout(timer);
  }

  private emit(kind: SandboxEventKind, sandboxId: string, reason?: string) {
    const ev: SandboxEvent = { kind, sandboxId, at: new Date().toISOString(), ...(reason ? { reason } : {}) };
    this.d.coordination.publish(SANDBOX_EVENTS_TOPIC, ev).catch((err) => this.d.logger.warn({ err }, 'event publish failed'));
  }
}

/** The sweep works from a list that may be stale: traffic may have moved the deadline since. */
function assertStillDue(r: Row): void {
  if (r.end_at === null || Number(r.end_at) > Date.now()) throw conflict(`sandbox ${r.sandbox_id} is no longer due: its idle deadline moved`);
}

function deadlineOf(r: Row): T.Deadline {
  return { timeoutSec: r.timeout_sec, endAt: r.end_at === null ? null : Number(r.end_at) };
}

/** Node errors keep their status when they are the caller's business (404, 409), else become 503. */
function passThrough(err: unknown, what: string): SvcError {
  const e = err as SvcError;
  if (e instanceof SvcError && (e.status === 409 || e.status === 404 || e.status === 400)) return e;
  return new SvcError(503, `${what}: ${e.message}`, { headers: { 'Retry-After': '2' } });
}

function parseStates(s: string | undefined): SandboxState[] {
  if (!s) return ['running', 'paused', 'pausing', 'resuming'];
  const out: SandboxState[] = [];
  for (const part of s.split(',').map((x) => x.trim()).filter(Boolean)) {
    if (part === 'running') out.push('running', 'resuming');
    else if (part === 'paused') out.push('paused', 'pausing');
    else throw badRequest(`state must be running or paused (got ${JSON.stringify(part)})`);
  }
  return out;
}

/** E2B sends `metadata=k%3Dv%26k2%3Dv2`: URL-encoded pairs, each key and value encoded again. */
function parseMetadataFilter(s: string | undefined): Array<[string, string]> {
  if (!s) return [];
  const out: Array<[string, string]> = [];
  for (const [k, v] of new URLSearchParams(s)) {
    try {
      out.push([decodeURIComponent(k), decodeURIComponent(v)]);
    } catch {
      throw badRequest('metadata filter is not valid URL encoding');
    }
  }
  return out;
}

/** The master's reason for a sandbox its node lost: 'oom' when the node knows the host stopped it for memory. */
function terminateReasonOf(e: EndedSandbox | undefined): TerminateReason {
  return e?.reason === 'oom' ? 'oom' : 'failed';
}

/** The environment a sandbox was created with (none recorded for sandboxes older than snapshots). */
function envOf(row: Row): Record<string, string> {
  return row.env_vars ? JSON.parse(row.env_vars) as Record<string, string> : {};
}

function encodeToken(a: { startedAt: number; id: string }): string {
  return Buffer.from(`${a.startedAt}:${a.id}`).toString('base64url');
}

function decodeToken(t: string): { startedAt: number; id: string } {
  const m = /^(\d+):([a-z0-9]+)$/.exec(Buffer.from(t, 'base64url').toString());
  if (!m) throw badRequest('nextToken is not valid');
  return { startedAt: Number(m[1]), id: m[2] };
}

export { LIVE };

/** An ISO 8601 instant of a list filter, as epoch milliseconds. */
function parseInstant(v: string | undefined, field: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const ms = Date.parse(v);
  if (!Number.isFinite(ms)) throw badRequest(`${field} must be an ISO 8601 timestamp, such as 2026-01-31T12:00:00Z`);
  return ms;
}

/** Unix seconds of a metrics range (a query string or a number). */
function parseUnixSeconds(v: unknown, field: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = typeof v === 'string' && /^\d{1,12}$/.test(v) ? Number(v) : typeof v === 'number' ? v : NaN;
  if (!Number.isInteger(n) || n < 0) throw badRequest(`${field} must be a unix timestamp in whole seconds`);
  return n;
}

/** Every string anywhere in a JSON value (the network rules, whatever shape they came in). */
function stringsIn(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  if (Array.isArray(v)) return v.flatMap(stringsIn);
  if (v && typeof v === 'object') return Object.values(v).flatMap(stringsIn);
  return [];
}

function iamNamesOf(row: Row): string[] {
  return row.iam ? Object.keys(JSON.parse(row.iam) as Record<string, unknown>) : [];
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
