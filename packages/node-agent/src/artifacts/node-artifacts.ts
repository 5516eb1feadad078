import { conflict } from '@svc/common';
import type { ArtifactOnNode, EnsureArtifact } from '@svc/contracts/node-agent';
import type { RuntimeDrivers } from '../runtime/drivers.ts';
import type { WarmPool } from '../sandboxes/warm-pool.ts';
import type { ArtifactStore } from './artifact-store.ts';

export interface NodeArtifactsDeps {
  store: ArtifactStore;
  drivers: RuntimeDrivers;
  /** Warm sandboxes per artifact: filled when one arrives, drained before one is deleted. */
  pool: WarmPool;
  /** Sandboxes on the artifact and creates on it under way. */
  users: (artifactId: string) => number;
}

/**
 * The artifacts routes of api.ts: templates' root filesystems brought to this node (downloaded,
 * verified, mounted where a runtime reads a directory) and removed when no sandbox uses them.
 */
export class NodeArtifacts {
  constructor(private readonly d: NodeArtifactsDeps) {}

  async ensure(id: string, req: EnsureArtifact): Promise<ArtifactOnNode> {
    const a = await this.d.store.ensure(id, req);
    if (this.d.drivers.all().some((d) => d.rootfsInput === 'directory')) await this.d.store.mount(id);
    this.d.pool.fill(id);
    return a;
  }

  list(): ArtifactOnNode[] {
    return this.d.store.list();
  }

  async delete(id: string): Promise<void> {
    const users = this.d.users(id);
    if (users > 0) throw conflict(`artifact ${id} is used by ${users} sandbox(es) on this node`);
    await this.d.pool.drain(id);
    await this.d.store.remove(id);
  }
}
