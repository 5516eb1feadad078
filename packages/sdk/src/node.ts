/**
 * `Node`: the compute nodes of the platform and their admin labels (`/nodes`).
 */
import { ApiClient } from './api-client.ts';
import { InvalidArgumentError, NotFoundError } from './errors.ts';
import type { NodeDrainOpts, NodeDrainResult, NodeInfo, SandboxApiOpts } from './types.ts';
import type { WireNode, WireNodeDrain } from './wire.ts';

const MAX_LABELS = 64;
// optional DNS-1123 subdomain prefix, then a name of alphanumerics, '-', '_' and '.'
const LABEL_NAME = /^(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

export class Node {
  static async list(opts: SandboxApiOpts = {}): Promise<NodeInfo[]> {
    // the document answers a list; an answer of `{nodes}` is read too, as it always was
    const res = await new ApiClient(opts).call('GET', '/nodes', { signal: opts.signal }) as WireNode[] | { nodes?: WireNode[] };
    const nodes = Array.isArray(res) ? res : res?.nodes ?? [];
    return nodes.map(toNodeInfo);
  }

  static async get(nodeId: string, opts: SandboxApiOpts = {}): Promise<NodeInfo> {
    return toNodeInfo(await new ApiClient(opts).call('GET', '/nodes/{id}', { params: { id: nodeId }, notFound: NotFoundError, signal: opts.signal }));
  }

  /** Adds or replaces admin labels; answers the node as the server reports it, when it does. */
  static async label(nodeId: string, labels: Record<string, string>, opts: SandboxApiOpts = {}): Promise<NodeInfo | undefined> {
    const names = Object.keys(labels);
    if (names.length === 0) throw new InvalidArgumentError('give at least one label');
    if (names.length > MAX_LABELS) throw new InvalidArgumentError(`a node carries at most ${MAX_LABELS} labels`);
    for (const n of names) checkLabelName(n);
    const res = await new ApiClient(opts).call('POST', '/nodes/{id}/labels', {
      params: { id: nodeId },
      body: { labels },
      notFound: NotFoundError,
      signal: opts.signal,
    });
    return res && typeof res === 'object' ? toNodeInfo(res) : undefined;
  }

  /** Removes admin labels by name. */
  static async unlabel(nodeId: string, names: string[], opts: SandboxApiOpts = {}): Promise<NodeInfo | undefined> {
    if (names.length === 0) throw new InvalidArgumentError('give at least one label name');
    for (const n of names) checkLabelName(n);
    const res = await new ApiClient(opts).call('DELETE', '/nodes/{id}/labels', {
      params: { id: nodeId },
      body: { names },
      notFound: NotFoundError,
      signal: opts.signal,
    });
    return res && typeof res === 'object' ? toNodeInfo(res) : undefined;
  }

  /**
   * Drains a node: it takes no new sandboxes, its running sandboxes are paused and resumed on
   * other nodes, and its paused ones are stored to resume elsewhere. The platform does that in
   * the background; this waits for it (polling its status, `onProgress` told of each change)
   * unless `wait` is false. A drain under way is joined, not started twice. Aborting `signal`
   * stops the waiting, not the drain.
   */
  static async drain(nodeId: string, opts: NodeDrainOpts = {}): Promise<NodeDrainResult> {
    let status = toDrainResult(await new ApiClient(opts).call('POST', '/nodes/{id}/drain', { params: { id: nodeId }, body: {}, notFound: NotFoundError, signal: opts.signal }));
    if (opts.wait === false) return status;
    opts.onProgress?.(status);
    while (status.state === 'running') {
      await sleep(opts.pollIntervalMs ?? 1000, opts.signal);
      const next = await Node.drainStatus(nodeId, opts);
      if (next.remaining !== status.remaining || next.state !== status.state) opts.onProgress?.(next);
      status = next;
    }
    return status;
  }

  /** The node's latest drain, under way or ended; NotFoundError when it has none on record. */
  static async drainStatus(nodeId: string, opts: SandboxApiOpts = {}): Promise<NodeDrainResult> {
    return toDrainResult(await new ApiClient(opts).call('GET', '/nodes/{id}/drain', { params: { id: nodeId }, notFound: NotFoundError, signal: opts.signal }));
  }

  /** Undoes a drain: the node takes new sandboxes again. */
  static async undrain(nodeId: string, opts: SandboxApiOpts = {}): Promise<NodeInfo> {
    return toNodeInfo(await new ApiClient(opts).call('DELETE', '/nodes/{id}/drain', { params: { id: nodeId }, notFound: NotFoundError, signal: opts.signal }));
  }
}

function checkLabelName(name: string): void {
  if (!LABEL_NAME.test(name)) throw new InvalidArgumentError(`label name ${JSON.stringify(name)} is not a valid [prefix/]name`);
}

function toDrainResult(d: WireNodeDrain): NodeDrainResult {
  const { node, ...rest } = d;
  return { ...rest, node: toNodeInfo(node as WireNode) };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => { clearTimeout(timer); reject(signal!.reason); };
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function toNodeInfo(n: WireNode): NodeInfo {
  const { id, nodeID, nodeId, labels, ...rest } = n;
  return { ...rest, id: String(id ?? nodeID ?? nodeId ?? ''), labels: labels ?? {} };
}
