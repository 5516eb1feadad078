import { sql, type Kysely } from 'kysely';
import { badRequest, notFound, unavailable, SvcError } from '@svc/common';
import { admissionRefusal, NodeAgentClient, realFreeMB, type NodeLoad, type RuntimeKind } from '@svc/contracts/node-agent';
import type { Database, NodeRow } from '../db/schema.ts';
import type { NodeHeartbeat, RegisterNode } from '@svc/contracts/master-internal';
import type { NodeRecord } from '@svc/contracts/master';
import { checkLabelName, checkLabelValue, matchesSelector, MAX_LABELS_PER_NODE } from '@svc/contracts/node-labels';

export const HEARTBEAT_INTERVAL_MS = 3_000;
/** A node that missed this many heartbeats is not scheduled onto. */
const STALE_AFTER_MS = HEARTBEAT_INTERVAL_MS * 4;
/** The status column of a drained node (else 'ready'). */
const DRAINING = 'draining';
/**
 * How long a cached node agent client is used before its node's address is read again: a node
 * that registers again at a new address (a restarted pod) does so with one master, and the
 * others learn it from the row, within this time.
 */
export const CLIENT_RECHECK_MS = 5_000;

/** The usage column: what the last heartbeat said. */
interface NodeUsage {
  running: number;
  paused: number;
  usedMemoryMB: number;
  memory?: NodeLoad;
}

export interface SchedulingNeed {
  memoryMB: number;
  cpuCount: number;
  /** Only this node will do (it keeps the snapshot layer the sandbox starts from). */
  onNode?: string;
  /** Only nodes that offer this runtime will do (absent: any, which runs it on its default). */
  runtime?: RuntimeKind;
  /** Only nodes whose labels hold every name=value of it will do (a create's nodeSelector). */
  selector?: Record<string, string>;
  /** Nodes that refused this create already (their own admission): not asked again. */
  exclude?: string[];
}

/** spread: the node with the most memory free; pack: the one with the least that still fits (master.placement). */
export type PlacementPolicy = 'spread' | 'pack';

/** Registered node agents: registration, heartbeats, labels and placement choice. */
export class NodeRegistry {
  private readonly clients = new Map<string, { client: NodeAgentClient; checkedAt: number }>();
  /** Creates sent to each node since its last heartbeat (its measurement does not show them yet). */
  private readonly promised = new Map<string, number>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly placement: PlacementPolicy = 'spread',
    /** node_agent.token: sent with every call to a node agent. */
    private readonly nodeToken = '',
  ) {}

  async register(req: RegisterNode): Promise<void> {
    if (!req?.nodeId || !req.address) throw badRequest('nodeId and address are required');
    const now = Date.now();
    const existing = await this.row(req.nodeId);
    const values = {
      address: req.address,
      runtime: req.runtime,
      runtimes: JSON.stringify(req.runtimes ?? [req.runtime]),
      pause_kinds: JSON.stringify(req.pauseKinds ?? []),
      capacity: JSON.stringify(req.capacity),
      release_ratio: req.pausedResourceReleaseRatio ?? 0,
      // A drained node stays drained across its restarts, until it is undrained (the update below).
      status: 'ready',
      version: req.version ?? '',
      last_heartbeat_at: now,
      egress_admin_url: req.egressAdminUrl ?? null,
      features: Array.isArray(req.features) ? JSON.stringify(req.features.filter((f) => typeof f === 'string').slice(0, 64)) : null,
    };
    if (existing) {
      // Decided in the update, not from the row read above: a drain started between the two was
      // undone by a node that registered again meanwhile (found by a helper reading the master).
      const status = sql<string>`case when status = ${DRAINING} then ${DRAINING} else 'ready' end`;
      await this.db.updateTable('t_svc_node').set({ ...values, status }).where('node_id', '=', req.nodeId).execute();
      // Its configured labels go over those the label routes set under the same names.
      if (req.labels && Object.keys(req.labels).length) await this.updateLabels(req.nodeId, (cur) => ({ ...cur, ...req.labels }));
    } else {
      await this.db.insertInto('t_svc_node').values({
        node_id: req.nodeId, ...values, labels: JSON.stringify(req.labels ?? {}), labels_version: 0,
        usage: JSON.stringify({ running: 0, paused: 0, usedMemoryMB: 0 }), registered_at: now,
      }).execute();
    }
    this.clients.set(req.nodeId, { client: new NodeAgentClient(req.address, { token: this.nodeToken }), checkedAt: Date.now() });
  }

  async heartbeat(nodeId: string, hb: NodeHeartbeat): Promise<void> {
    const usage: NodeUsage = {
      running: hb?.sandboxes?.running ?? 0, paused: hb?.sandboxes?.paused ?? 0, usedMemoryMB: hb?.usedMemoryMB ?? 0,
      ...(hb?.memory ? { memory: hb.memory } : {}),
    };
    this.promised.delete(nodeId);
    const r = await this.db.updateTable('t_svc_node')
      .set({ last_heartbeat_at: Date.now(), usage: JSON.stringify(usage) })
      .where('node_id', '=', nodeId).executeTakeFirst();
    if (Number(r.numUpdatedRows) === 0) throw notFound(`node ${nodeId} is not registered`);
  }

  /** What the node agent supports beyond the base protocol (NodeInfo.features); [] for an older agent. */
  async features(nodeId: string): Promise<string[]> {
    const raw = (await this.row(nodeId))?.features;
    try {
      return raw ? JSON.parse(raw) as string[] : [];
    } catch {
      return [];
    }
  }

  /** The admin URL of the node's egress proxy; undefined when it has none. */
  async egressAdminUrl(nodeId: string): Promise<string | undefined> {
    return (await this.row(nodeId))?.egress_admin_url ?? undefined;
  }

  /** The node's agent client, at the address its row holds (read again after CLIENT_RECHECK_MS). */
  async client(nodeId: string): Promise<NodeAgentClient> {
    const now = Date.now();
    const cached = this.clients.get(nodeId);
    if (cached && now - cached.checkedAt < CLIENT_RECHECK_MS) return cached.client;
    const row = await this.row(nodeId);
    if (!row) throw unavailable(`node ${nodeId} is not registered`);
    // The same client while the address holds, so calls under way keep theirs.
    const client = cached && cached.client.baseUrl === row.address.replace(/\/+$/, '') ? cached.client : new NodeAgentClient(row.address, { token: this.nodeToken });
    this.clients.set(nodeId, { client, checkedAt: now });
    return client;
  }

  /**
   * The live node with the most real memory free that admits the sandbox (NodeLoad rule of
   * @svc/node-agent/api: measured usage plus a reserve, and the nominal quota). Creates sent to
   * a node since its last heartbeat count at one sandbox's measured size each. Nodes that
   * report no measurement (older agents) are admitted by nominal memory alone.
   */
  async pick(need: SchedulingNeed): Promise<{ nodeId: string; client: NodeAgentClient }> {
    let q = this.db.selectFrom('t_svc_node').selectAll().where('last_heartbeat_at', '>', Date.now() - STALE_AFTER_MS).where('status', '!=', DRAINING);
    if (need.onNode) q = q.where('node_id', '=', need.onNode);
    if (need.exclude?.length) q = q.where('node_id', 'not in', need.exclude);
    let rows = await q.execute();
    if (rows.length === 0 && need.onNode) throw unavailable(`node ${need.onNode}, which keeps the snapshot, is not available now`, 5);
    if (rows.length === 0) throw unavailable('no node agent is available to run the sandbox', 5);
    rows = rows.filter((r) => fitsNeed(r, need));
    if (rows.length === 0) await this.noNodeMatches(need);
    const refusals: string[] = [];
    const fits: Array<{ nodeId: string; free: number }> = [];
    for (const r of rows) {
      const usage = JSON.parse(r.usage) as NodeUsage;
      const promised = this.promised.get(r.node_id) ?? 0;
      let refusal: string | undefined;
      let free: number;
      if (usage.memory) {
        const pendingMB = promised * usage.memory.perSandboxMB;
        refusal = admissionRefusal(usage.memory, need.memoryMB, pendingMB);
        free = realFreeMB(usage.memory, pendingMB);
      } else {
        free = (JSON.parse(r.capacity) as { memoryMB: number }).memoryMB - usage.usedMemoryMB;
        if (free < need.memoryMB) refusal = `${free} MB of nominal memory free, the sandbox asks ${need.memoryMB} MB`;
      }
      if (refusal) refusals.push(`node ${r.node_id}: ${refusal}`);
      else fits.push({ nodeId: r.node_id, free });
    }
    const best = fits.sort((x, y) => (this.placement === 'pack' ? x.free - y.free : y.free - x.free))[0];
    if (!best) throw new SvcError(503, `no node can take the sandbox now: ${refusals.join('; ')}`, { headers: { 'Retry-After': '5' } });
    this.promised.set(best.nodeId, (this.promised.get(best.nodeId) ?? 0) + 1);
    return { nodeId: best.nodeId, client: await this.client(best.nodeId) };
  }

  /**
   * Why no live node can take a create that asks for a runtime or labels: 503 when a node that
   * has them is down, 400 when no registered node has them (or the node that keeps the
   * snapshot lacks them).
   */
  private async noNodeMatches(need: SchedulingNeed): Promise<never> {
    const asked = [
      ...(need.runtime ? [`the ${need.runtime} runtime`] : []),
      ...(need.selector && Object.keys(need.selector).length ? [`labels ${Object.entries(need.selector).map(([k, v]) => `${k}=${v}`).join(',')}`] : []),
    ].join(' and ');
    if (need.onNode) throw badRequest(`node ${need.onNode}, which keeps the snapshot, lacks ${asked}`);
    const all = await this.db.selectFrom('t_svc_node').selectAll().execute();
    if (all.some((r) => fitsNeed(r, need))) throw unavailable(`no node with ${asked} is available now`, 5);
    if (need.runtime && !all.some((r) => runtimesOf(r).includes(need.runtime!))) {
      const offered = [...new Set(all.flatMap(runtimesOf))];
      throw badRequest(`no node offers the ${need.runtime} runtime (${offered.length ? `nodes offer ${offered.join(', ')}` : 'no node is registered'}); node_agent.runtime says what a node offers (docs/runtimes.md)`);
    }
    throw badRequest(`no node has ${asked} (svc node list shows the nodes' runtimes and labels; docs/cluster.md)`);
  }

  async list(): Promise<NodeRecord[]> {
    const rows = await this.db.selectFrom('t_svc_node').selectAll().orderBy('node_id').execute();
    return rows.map(toRecord);
  }

  async get(nodeId: string): Promise<NodeRecord> {
    const row = await this.row(nodeId);
    if (!row) throw notFound(`node ${nodeId} not found`);
    return toRecord(row);
  }

  /** Nodes whose last heartbeat is older than `silentMs`, with it. */
  async silentNodes(silentMs: number): Promise<Array<{ nodeId: string; lastHeartbeatAt: number }>> {
    const rows = await this.db.selectFrom('t_svc_node').select(['node_id', 'last_heartbeat_at']).where('last_heartbeat_at', '<', Date.now() - silentMs).execute();
    return rows.map((r) => ({ nodeId: r.node_id, lastHeartbeatAt: Number(r.last_heartbeat_at) }));
  }

  /**
   * Drains a node (no new sandboxes go there; docs/cluster.md, "Draining a node") or undrains
   * it. 404 when it is not registered.
   */
  async setDraining(nodeId: string, draining: boolean): Promise<NodeRecord> {
    const r = await this.db.updateTable('t_svc_node').set({ status: draining ? DRAINING : 'ready' }).where('node_id', '=', nodeId).executeTakeFirst();
    if (Number(r.numUpdatedRows) === 0) throw notFound(`node ${nodeId} not found`);
    return this.get(nodeId);
  }

  /** Where a sandbox on this node may go on: 'ready' there, 'draining' (move it), 'lost' (silent or unknown). */
  async standing(nodeId: string): Promise<'ready' | 'draining' | 'lost'> {
    const row = await this.row(nodeId);
    if (!row || Number(row.last_heartbeat_at) <= Date.now() - STALE_AFTER_MS) return 'lost';
    return row.status === DRAINING ? 'draining' : 'ready';
  }

  /** How many nodes are registered, live or not. */
  async count(): Promise<number> {
    const r = await this.db.selectFrom('t_svc_node').select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  async liveNodeIds(): Promise<string[]> {
    const rows = await this.db.selectFrom('t_svc_node').select('node_id').where('last_heartbeat_at', '>', Date.now() - STALE_AFTER_MS).execute();
    return rows.map((r) => r.node_id);
  }

  /** Adds or overwrites labels. Concurrent updates are serialised by a version check. */
  async addLabels(nodeId: string, labels: unknown): Promise<NodeRecord> {
    if (!labels || typeof labels !== 'object' || Array.isArray(labels)) throw badRequest('labels must be an object of name to value');
    const entries = Object.entries(labels as Record<string, unknown>);
    if (entries.length === 0) throw badRequest('labels must not be empty');
    for (const [k, v] of entries) { checkLabelName(k); checkLabelValue(k, v); }
    return this.updateLabels(nodeId, (cur) => {
      const next = { ...cur, ...(labels as Record<string, string>) };
      if (Object.keys(next).length > MAX_LABELS_PER_NODE) {
        throw badRequest(`a node holds at most ${MAX_LABELS_PER_NODE} labels (this would make ${Object.keys(next).length})`);
      }
      return next;
    });
  }

  async removeLabels(nodeId: string, names: unknown): Promise<NodeRecord> {
    if (!Array.isArray(names) || names.length === 0 || !names.every((n) => typeof n === 'string')) {
      throw badRequest('names must be a non-empty list of label names');
    }
    for (const n of names) checkLabelName(n);
    return this.updateLabels(nodeId, (cur) => {
      const next = { ...cur };
      for (const n of names as string[]) delete next[n];
      return next;
    });
  }

  private async updateLabels(nodeId: string, change: (cur: Record<string, string>) => Record<string, string>): Promise<NodeRecord> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const row = await this.row(nodeId);
      if (!row) throw notFound(`node ${nodeId} not found`);
      const next = change(JSON.parse(row.labels));
      const r = await this.db.updateTable('t_svc_node')
        .set({ labels: JSON.stringify(next), labels_version: row.labels_version + 1 })
        .where('node_id', '=', nodeId).where('labels_version', '=', row.labels_version)
        .executeTakeFirst();
      if (Number(r.numUpdatedRows) === 1) return this.get(nodeId);
      await new Promise((res) => setTimeout(res, 5 + Math.random() * 20));
    }
    throw new SvcError(409, `labels of node ${nodeId} are being changed concurrently; retry`);
  }

  private row(nodeId: string): Promise<NodeRow | undefined> {
    return this.db.selectFrom('t_svc_node').selectAll().where('node_id', '=', nodeId).executeTakeFirst();
  }
}

function toRecord(r: NodeRow): NodeRecord {
  return {
    nodeId: r.node_id,
    address: r.address,
    runtime: r.runtime,
    runtimes: runtimesOf(r),
    pauseKinds: JSON.parse(r.pause_kinds),
    status: r.last_heartbeat_at <= Date.now() - STALE_AFTER_MS ? 'unreachable' : r.status === DRAINING ? 'draining' : 'ready',
    capacity: JSON.parse(r.capacity),
    usage: JSON.parse(r.usage),
    pausedResourceReleaseRatio: Number(r.release_ratio),
    labels: JSON.parse(r.labels),
    version: r.version,
    lastHeartbeatAt: new Date(Number(r.last_heartbeat_at)).toISOString(),
  };
}

/** The runtimes a node offers, its default first (an agent older than NodeInfo.runtimes: its one). */
function runtimesOf(r: NodeRow): RuntimeKind[] {
  if (r.runtimes) {
    try {
      return JSON.parse(r.runtimes) as RuntimeKind[];
    } catch {
      // A row this master did not write in this form: the default alone is what is known.
    }
  }
  return [r.runtime as RuntimeKind];
}

/** Whether the node offers what the create asks for: its runtime and its labels. */
function fitsNeed(r: NodeRow, need: SchedulingNeed): boolean {
  return (!need.runtime || runtimesOf(r).includes(need.runtime)) && matchesSelector(JSON.parse(r.labels) as Record<string, string>, need.selector);
}
