import type { Duplex } from 'node:stream';

/**
 * A listener's open connections by the sandbox address they came from, so that a change of that
 * sandbox's policy ends them (docs/egress.md "Changing a policy"): a CONNECT or WebSocket tunnel,
 * a TCP tunnel, or a keep-alive connection mid-response was decided by the old policy, and the
 * proxy decides nothing more on it while it lasts. Also what close() ends.
 */
export class SandboxConnections {
  private readonly byAddress = new Map<string, Set<Duplex>>();

  /** Tracks the socket until it closes. */
  add(address: string, socket: Duplex): void {
    let set = this.byAddress.get(address);
    if (!set) this.byAddress.set(address, set = new Set());
    set.add(socket);
    socket.once('close', () => {
      const now = this.byAddress.get(address);
      if (!now?.delete(socket)) return;
      if (now.size === 0) this.byAddress.delete(address);
    });
  }

  /** Ends every connection from `address`; how many there were. */
  closeFor(address: string): number {
    const set = this.byAddress.get(address);
    if (!set) return 0;
    this.byAddress.delete(address);
    for (const socket of set) socket.destroy();
    return set.size;
  }

  destroyAll(): void {
    for (const address of [...this.byAddress.keys()]) this.closeFor(address);
  }

  /** Open connections from `address` (tests). */
  countFor(address: string): number {
    return this.byAddress.get(address)?.size ?? 0;
  }
}
