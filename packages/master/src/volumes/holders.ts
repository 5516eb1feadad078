/**
 * Which nodes hold a volume, asked of the nodes themselves: whether a DELETE may go on, and
 * which node serves a content call.
 */
import { conflict, unavailable, wrapError, type Logger, type SvcError } from '@svc/common';
import { VOLUME_CODES, type NodeVolumeAttachment } from '@svc/contracts/volumes';
import type { VolumeNodes } from './ports.ts';

/** How long a node's list stays good enough to choose a content call's node (a call per node per content call would not do). */
const CONTENT_LIST_TTL_MS = 2_000;
/** How long a content call waits for a node's list: a slow node only loses its say in the choice. */
const CONTENT_LIST_WAIT_MS = 1_000;

type LiveNode = Awaited<ReturnType<VolumeNodes['live']>>[number];

/**
 * Throws 409 (code 130409) when any node may hold the volume: a live node that lists it, or a
 * node that does not answer where the master's records put a sandbox that mounts it. The nodes'
 * own lists decide, not the refcount, which may lag an answer that was lost either way. A live
 * node that does not answer fails the check (retry), as a node that does not answer at all does.
 */
export async function refuseWhileHeld(nodes: VolumeNodes, volume: { volumeId: string; name: string; teamId: string }): Promise<void> {
  const holding: string[] = [];
  for (const n of await nodes.live()) {
    const list = await nodes.attachments(n.nodeId).catch((err: Error) => {
      throw wrapError(err, `node ${n.nodeId} did not say whether it holds volume ${volume.name}; retry the delete`);
    });
    if (list.some((a) => a.volumeId === volume.volumeId)) holding.push(n.nodeId);
  }
  if (holding.length > 0) throw inUse(volume.name, holding.length);
  const away = await nodes.unreachableHolders(volume);
  if (away.length > 0) {
    const { nodeId, sandboxId } = away[0];
    const more = away.length > 1 ? ` (and ${away.length - 1} more)` : '';
    throw conflict(`volume ${volume.name} may still be mounted on node ${nodeId}, which does not answer: sandbox ${sandboxId}${more} mounts it. Kill the sandbox, or bring the node back, then delete the volume`, VOLUME_CODES.inUse);
  }
}

function inUse(name: string, nodes: number): SvcError {
  return conflict(`volume ${name} is mounted (held on ${nodes} node${nodes === 1 ? '' : 's'}); kill the sandboxes that mount it, then delete it`, VOLUME_CODES.inUse);
}

/**
 * The node to serve a content call: one that holds the volume now (a `local` volume without
 * shared storage has its data on one host only, where its sandboxes run), else any live node
 * with volume support (it attaches the volume for the call).
 */
export class ContentNodes {
  private readonly lists = new Map<string, { until: number; list: Promise<NodeVolumeAttachment[] | undefined> }>();

  constructor(private readonly nodes: VolumeNodes, private readonly logger: Logger) {}

  async pick(volumeId: string): Promise<LiveNode> {
    const live = await this.nodes.live();
    if (live.length === 0) throw unavailable('no node agent with volume support is available to serve the volume\'s content', 5);
    const lists = await Promise.all(live.map((n) => within(this.listOf(n.nodeId), CONTENT_LIST_WAIT_MS)));
    const holding = live.filter((_, i) => lists[i]?.some((a) => a.volumeId === volumeId));
    const pool = holding.length > 0 ? holding : live;
    return pool[Math.floor(Math.random() * pool.length)];
  }

  private listOf(nodeId: string): Promise<NodeVolumeAttachment[] | undefined> {
    const now = Date.now();
    const cached = this.lists.get(nodeId);
    if (cached && cached.until > now) return cached.list;
    const list = this.nodes.attachments(nodeId).catch((err: Error) => {
      // Only the choice of node suffers: the call goes to another node, which attaches the volume itself.
      this.logger.warn({ nodeId, err: err.message }, 'node did not list its volume attachments; a content call is served by any node');
      return undefined;
    });
    for (const [id, c] of this.lists) if (c.until <= now) this.lists.delete(id);
    this.lists.set(nodeId, { until: now + CONTENT_LIST_TTL_MS, list });
    return list;
  }
}

/** What `p` gives within `ms`, else undefined (p goes on, and a later call may use it). */
async function within<T>(p: Promise<T | undefined>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => { timer = setTimeout(resolve, ms, undefined); });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}
