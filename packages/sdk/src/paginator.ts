/**
 * Cursor pagination as in the e2b SDK: `hasNext`, `nextToken` (from the `X-Next-Token`
 * answer header) and `nextItems()`.
 */
import { ApiClient } from './api-client.ts';
import type { ConnectionOpts } from './config.ts';
import { toSandboxInfo, toSnapshotInfo } from './sandbox-wire.ts';
import type { SandboxInfo, SandboxListOpts, SnapshotInfo, SnapshotListOpts } from './types.ts';

/**
 * `k=v&k2=v2` with every key and value URL-encoded first, exactly as the e2b SDK sends it
 * (the server decodes the pairs, then each key and value).
 */
function encodeMetadataFilter(metadata: Record<string, string>): string {
  const encoded = Object.entries(metadata).map(([k, v]): [string, string] => [encodeURIComponent(k), encodeURIComponent(v)]);
  return new URLSearchParams(encoded).toString();
}

export abstract class Paginator<T> {
  private _hasNext = true;
  private _nextToken?: string;

  constructor(nextToken?: string) {
    this._nextToken = nextToken;
  }

  get hasNext(): boolean { return this._hasNext; }
  get nextToken(): string | undefined { return this._nextToken; }

  protected updatePagination(headers: Headers): void {
    this._nextToken = headers.get('x-next-token') || undefined;
    this._hasNext = !!this._nextToken;
  }

  /** The next page; throws when `hasNext` is false. */
  abstract nextItems(): Promise<T[]>;
}

export class SandboxPaginator extends Paginator<SandboxInfo> {
  private readonly opts: SandboxListOpts;

  constructor(opts: SandboxListOpts = {}) {
    super(opts.nextToken);
    this.opts = opts;
  }

  async nextItems(): Promise<SandboxInfo[]> {
    if (!this.hasNext) throw new Error('no more items to fetch');
    const { query, limit, ...conn } = this.opts;
    const api = new ApiClient(conn as ConnectionOpts);
    const res = await api.callWithResponse('GET', '/v2/sandboxes', {
      query: {
        metadata: query?.metadata ? encodeMetadataFilter(query.metadata) : undefined,
        state: query?.state,
        limit,
        nextToken: this.nextToken,
      },
    });
    this.updatePagination(res.headers);
    return (res.data ?? []).map(toSandboxInfo);
  }
}

/** Snapshots, newest first (`Sandbox.listSnapshots`). */
export class SnapshotPaginator extends Paginator<SnapshotInfo> {
  private readonly opts: SnapshotListOpts;

  constructor(opts: SnapshotListOpts = {}) {
    super(opts.nextToken);
    this.opts = opts;
  }

  async nextItems(): Promise<SnapshotInfo[]> {
    if (!this.hasNext) throw new Error('no more items to fetch');
    const { sandboxId, name, limit, ...conn } = this.opts;
    const api = new ApiClient(conn as ConnectionOpts);
    const res = await api.callWithResponse('GET', '/snapshots', {
      query: { sandboxID: sandboxId, name, limit, nextToken: this.nextToken },
    });
    this.updatePagination(res.headers);
    return (res.data ?? []).map(toSnapshotInfo);
  }
}
