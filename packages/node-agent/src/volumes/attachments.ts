import { SvcError, type Logger } from '@svc/common';
import { VolumePluginError } from '@svc/volumes';
import {
  HOST_BIND_TIMEOUT_MS, VOLUME_NAMESPACE,
  type NodeVolumeAttachment, type VolumeMountOnNode, type VolumeNodeHooks, type VolumeOnNode, type VolumeRefFlip,
} from '@svc/contracts/volumes';
import { KeyedMutex } from '../sandboxes/keyed-mutex.ts';
import { run } from '../host/exec.ts';

/** A volume attached for one sandbox, as its instance record keeps it (for detach and restarts). */
export interface AttachedVolume extends VolumeMountOnNode {
  hostPath: string;
  metadata: Record<string, string>;
}

/**
 * Who holds an attachment: a sandbox, or a content API call in flight. Only sandboxes move the
 * master's refcount (docs/volumes.md, "Lifecycle and counts"): a content call attaches and detaches
 * within one request, and reporting its flips could interleave with a sandbox's and skew it.
 */
export interface Holder { id: string; kind: 'sandbox' | 'content' }

interface Held {
  driver: string;
  hostPath: string;
  metadata: Record<string, string>;
  holders: Map<string, Holder['kind']>;
}

export interface AttachmentsDeps {
  logger: Logger;
  /** This node's id: a failure's message names it, so that its caller knows whose log to read. */
  nodeId: string;
  /** The node hooks of a driver; throws 'no plugin registered for driver' when the node lacks it. */
  hooksFor(driver: string): VolumeNodeHooks;
  /** node_agent.volume_plugin_base_dir: every host path an Attach answers must lie inside it. */
  baseDir: string;
}

/**
 * The node-local volume counts: the first holder on this node mounts (Attach with refCount 0),
 * later ones reuse the host path, the last one's Detach (refCount 0) tears the host mount down.
 * One operation at a time per volume; a failed attach of several volumes detaches what it had
 * attached before it fails.
 */
export class VolumeAttachments {
  private readonly held = new Map<string, Held>();
  private readonly locks = new KeyedMutex();
  /** The base directory resolved once (it does not move under a running agent). */
  private base?: Promise<string | undefined>;

  constructor(private readonly d: AttachmentsDeps) {}

  /** Attaches every volume for `holder`, in order; all or nothing. */
  async attach(holder: Holder, mounts: VolumeMountOnNode[]): Promise<{ attached: AttachedVolume[]; flips: VolumeRefFlip[] }> {
    const attached: AttachedVolume[] = [];
    const flips: VolumeRefFlip[] = [];
    try {
      for (const m of mounts) {
        const r = await this.attachOne(holder, m);
        attached.push({ ...m, hostPath: r.hostPath, metadata: r.metadata });
        if (r.flip) flips.push(r.flip);
      }
      return { attached, flips };
    } catch (err) {
      // Operators read plugin failures here (docs/volume-plugins.md, "Rules": failures say why, in the answer or this log).
      this.d.logger.warn({ holder: holder.id, volumes: mounts.map((m) => `${m.volumeId}:${m.driver}`), err: (err as Error).message }, 'volume attach failed; detaching what was attached');
      // Rollback: the create fails with nothing of it left attached (docs/volume-plugins.md, "Diagnostics"); the
      // rollback's flips cancel the attach's, so the master is told neither.
      await this.detach(holder, attached.map((a) => a.volumeId));
      throw err;
    }
  }

  /** Detaches `holder` from each volume it holds among `volumeIds`; failures are logged, never thrown. */
  async detach(holder: Holder, volumeIds: string[]): Promise<VolumeRefFlip[]> {
    const flips: VolumeRefFlip[] = [];
    for (const volumeId of volumeIds) {
      const flip = await this.detachOne(holder, volumeId);
      if (flip) flips.push(flip);
    }
    return flips;
  }

  /**
   * After an agent restart: the attachments the kept sandboxes hold (their host mounts are still
   * there), so that counts go on from where they were.
   */
  adopt(holderId: string, volumes: AttachedVolume[]): void {
    for (const v of volumes) {
      const h = this.held.get(v.volumeId) ?? { driver: v.driver, hostPath: v.hostPath, metadata: v.metadata, holders: new Map() };
      h.holders.set(holderId, 'sandbox');
      this.held.set(v.volumeId, h);
    }
  }

  list(): NodeVolumeAttachment[] {
    return [...this.held].map(([volumeId, h]) => ({ volumeId, driver: h.driver, hostPath: h.hostPath, refCount: h.holders.size, holders: [...h.holders.keys()] }));
  }

  /** A content call's host path of a volume, attached for the call: release() detaches it. */
  async open(v: VolumeOnNode, callId: string): Promise<{ root: string; release(): Promise<void> }> {
    const holder: Holder = { id: `content:${callId}`, kind: 'content' };
    const { attached } = await this.attach(holder, [{ ...v, path: '/', readOnly: false }]);
    let released = false;
    return {
      root: attached[0].hostPath,
      release: async () => {
        if (released) return;
        released = true;
        await this.detach(holder, [v.volumeId]);
      },
    };
  }

  private attachOne(holder: Holder, m: VolumeOnNode): Promise<{ hostPath: string; metadata: Record<string, string>; flip?: VolumeRefFlip }> {
    return this.locks.run(m.volumeId, async () => {
      const cur = this.held.get(m.volumeId);
      if (cur?.holders.has(holder.id)) throw new SvcError(400, `volume ${m.volumeId} is already attached to ${holder.id}; a sandbox may attach a volume only once`);
      if (cur && cur.driver !== m.driver) throw new SvcError(409, `volume ${m.volumeId} is attached on this node with driver ${cur.driver}, not ${m.driver}`);
      const hooks = this.d.hooksFor(m.driver);
      const refCount = cur?.holders.size ?? 0;
      const out = await hooks.attach({
        sandboxId: holder.id, namespace: VOLUME_NAMESPACE, volumeId: m.volumeId, refCount, volumeBaseDir: this.d.baseDir, privateData: m.privateData,
      }).catch((err: Error) => { throw this.attachError(m, holder, err); });
      // A host path the node already validated and holds needs no second look.
      const problem = cur?.hostPath === out.hostPath ? undefined : await this.hostPathProblem(out.hostPath);
      if (problem) {
        // The plugin mounted something (or says so): undo it with the same count, as after a failed create.
        if (refCount === 0) await this.callDetach(hooks, holder, m.volumeId, 0, out.metadata);
        // The paths go to this node's log only (they are the host's layout, not the caller's business).
        this.d.logger.error({ volumeId: m.volumeId, driver: m.driver, holder: holder.id, hostPath: out.hostPath, problem }, 'volume plugin answered a host path the node may not mount; detached what it mounted');
        throw new SvcError(400, `the volume plugin '${m.driver}' answered a host path for volume ${m.volumeId} on node ${this.d.nodeId} that lies outside volume_plugin_base_dir or does not exist; the node's log has the detail`);
      }
      if (cur && cur.hostPath !== out.hostPath) {
        this.d.logger.warn({ volumeId: m.volumeId, was: cur.hostPath, now: out.hostPath }, 'a volume plugin answered another host path for a volume already attached; the first stays in use');
      }
      const h = cur ?? { driver: m.driver, hostPath: out.hostPath, metadata: out.metadata, holders: new Map() };
      const sandboxesBefore = sandboxCount(h);
      h.holders.set(holder.id, holder.kind);
      this.held.set(m.volumeId, h);
      const flip = holder.kind === 'sandbox' && sandboxesBefore === 0 ? { volumeId: m.volumeId, delta: 1 as const } : undefined;
      return { hostPath: h.hostPath, metadata: h.metadata, ...(flip ? { flip } : {}) };
    });
  }

  private detachOne(holder: Holder, volumeId: string): Promise<VolumeRefFlip | undefined> {
    return this.locks.run(volumeId, async () => {
      const h = this.held.get(volumeId);
      if (!h?.holders.has(holder.id)) return undefined;
      h.holders.delete(holder.id);
      const flip = holder.kind === 'sandbox' && sandboxCount(h) === 0 ? { volumeId, delta: -1 as const } : undefined;
      if (h.holders.size === 0) this.held.delete(volumeId);
      let hooks: VolumeNodeHooks;
      try {
        hooks = this.d.hooksFor(h.driver);
      } catch (err) {
        this.d.logger.error({ volumeId, driver: h.driver, err: (err as Error).message }, 'volume detach: no plugin for its driver; the host mount stays');
        return flip;
      }
      await this.callDetach(hooks, holder, volumeId, h.holders.size, h.metadata);
      return flip;
    });
  }

  /**
   * A plugin's failed attach as its caller (a sandbox create, a content call) is told it: the
   * plugin's own words (`/data/svc-shared/volume-data/<id>`, `mount --bind ... /path`) name the
   * host's paths, so they go to this node's log with the volume's id; the caller gets the plugin,
   * the volume, the node and where to look. Only a reason svc worded itself is passed on.
   */
  private attachError(m: VolumeOnNode, holder: Holder, err: Error): SvcError {
    this.d.logger.error({ volumeId: m.volumeId, driver: m.driver, holder: holder.id, err: err.message }, 'volume plugin attach failed');
    const why = err instanceof VolumePluginError && err.forCaller ? `: ${err.forCaller}` : '; the node\'s log has the detail';
    return new SvcError(500, `the volume plugin '${m.driver}' could not attach volume ${m.volumeId} on node ${this.d.nodeId}${why}`);
  }

  /** Detach never fails the caller: a sandbox is gone whatever its plugin says (the error is logged). */
  private async callDetach(hooks: VolumeNodeHooks, holder: Holder, volumeId: string, refCount: number, metadata: Record<string, string>): Promise<void> {
    await hooks.detach({ sandboxId: holder.id, namespace: VOLUME_NAMESPACE, volumeId, refCount, metadata }).catch((err: Error) => {
      this.d.logger.error({ volumeId, holder: holder.id, refCount, err: err.message }, 'volume plugin detach failed; its host mount may stay behind');
    });
  }

  /**
   * Why a host path cannot be mounted into a sandbox, or undefined. Resolved by `realpath` in a
   * child process with the bind timeout: a hung network mount fails the create instead of
   * blocking a thread of this process (docs/volumes.md, "Limits and figures": 3 s).
   */
  private async hostPathProblem(hostPath: string): Promise<string | undefined> {
    if (typeof hostPath !== 'string' || !hostPath.startsWith('/')) return 'which is not an absolute path';
    this.base ??= realpath(this.d.baseDir);
    const [path, base] = await Promise.all([realpath(hostPath), this.base]);
    if (path === undefined) return `which does not exist or did not answer within ${HOST_BIND_TIMEOUT_MS} ms`;
    if (base === undefined) {
      this.base = undefined;
      return `and the base directory ${this.d.baseDir} does not exist`;
    }
    if (path === base || !path.startsWith(`${base}/`)) return `outside volume_plugin_base_dir ${base}`;
    return undefined;
  }
}

function sandboxCount(h: Held): number {
  let n = 0;
  for (const kind of h.holders.values()) if (kind === 'sandbox') n++;
  return n;
}

async function realpath(path: string): Promise<string | undefined> {
  const r = await run('realpath', ['-e', '--', path], { allowFail: true, timeoutMs: HOST_BIND_TIMEOUT_MS }).catch(() => {
    // Timed out (a hung mount under it): unresolvable, which the caller refuses with the path named.
    return undefined;
  });
  return r && r.code === 0 ? r.stdout.trim() : undefined;
}
