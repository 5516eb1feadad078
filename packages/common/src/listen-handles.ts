/**
 * The listening sockets of a worker pool, held by its primary (docs/design.md, "Proxies on every
 * core"). node's cluster module closes a shared socket when its last worker leaves, so with one
 * worker (`proxy.workers: 1`, or every worker dying at once) the port refused connections until
 * the replacement listened. Here the primary binds each socket once and keeps it for the pool's
 * life; every worker, a replacement too, is sent the same socket and listens on it. The primary
 * never accepts: while no worker runs, connections wait in the kernel's backlog and the
 * replacement takes them.
 */
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import { getSystemErrorName } from 'node:util';

/** The bound socket node's `net` makes for a listener (`net._createServerHandle`, what cluster's primary uses too). */
export interface ListenHandle {
  close(): void;
  getsockname(out: { port?: number }): number;
}

type CreateServerHandle = (address: string | null, port: number, addressType: number) => ListenHandle | number;

/** A listener's address as a worker asks for it. */
export interface ListenRequest {
  host: string;
  port: number;
  /**
   * Which of the worker's listeners on this address it is (0, 1, ...): a worker with three
   * port-0 listeners gets three sockets, and every worker's n-th is the same one (as cluster keys them).
   */
  index: number;
}

/** A bind that failed, with the errno's name node's own listen gives (EADDRINUSE, EACCES, ...). */
export class ListenError extends Error {
  constructor(readonly code: string, where: string) {
    super(`listen ${code}: ${where}`);
    this.name = 'ListenError';
  }
}

export class ListenHandles {
  /** By the address and index asked for: a port-0 listener is bound once, and every worker shares that ephemeral port. */
  private readonly handles = new Map<string, Promise<ListenHandle>>();
  private closed = false;

  /** The socket for `host:port`, bound on the first ask. Rejects with a ListenError when the bind fails. */
  get(r: ListenRequest): Promise<ListenHandle> {
    if (this.closed) return Promise.reject(new Error('the worker pool is closed'));
    const key = `${r.host}|${r.port}|${r.index}`;
    let h = this.handles.get(key);
    if (!h) {
      h = bind(r);
      this.handles.set(key, h);
      // A failed bind is not kept: the next worker's ask tries again (the port may be free by then).
      h.catch(() => { if (this.handles.get(key) === h) this.handles.delete(key); });
    }
    return h;
  }

  /** Closes every socket: after the workers are gone, the port is free. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.handles.values()];
    this.handles.clear();
    for (const h of await Promise.allSettled(all)) if (h.status === 'fulfilled') h.value.close();
  }
}

async function bind(r: ListenRequest): Promise<ListenHandle> {
  // node's listen resolves a name the same way: the first address the resolver gives.
  const address = r.host === '' ? null : net.isIP(r.host) ? r.host : (await lookup(r.host)).address;
  const create = (net as unknown as { _createServerHandle: CreateServerHandle })._createServerHandle;
  const handle = create(address, r.port, address === null ? 4 : net.isIP(address));
  if (typeof handle === 'number') throw new ListenError(getSystemErrorName(handle), `${r.host}:${r.port}`);
  // libuv keeps a bind's EADDRINUSE for the listen, which the worker does on its own copy of the
  // socket: there the unbound socket would listen on a random port. A bound one has its port.
  const bound: { port?: number } = {};
  const err = handle.getsockname(bound);
  if (err !== 0 || !bound.port) {
    handle.close();
    throw new ListenError(err !== 0 ? getSystemErrorName(err) : 'EADDRINUSE', `${r.host}:${r.port}`);
  }
  return handle;
}
