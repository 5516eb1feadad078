import type { Logger } from '@svc/common';
import { MasterInternalClient, type NodeHeartbeat, type RegisterNode } from '@svc/contracts/master-internal';

export interface MasterLinkOptions {
  masterAddr: string;
  /** cluster_token (docs/cluster.md): the master takes it on every route. */
  clusterToken?: string;
  logger: Logger;
  registration: () => RegisterNode;
  heartbeat: () => NodeHeartbeat;
  /** Used until the master names an interval (and as the retry delay while it is down). */
  defaultIntervalMs?: number;
}

/**
 * Registers the node with the master and heartbeats it. A 404 on a heartbeat means the master
 * forgot the node (restart, new database): register again. A master that is down is retried
 * quietly; the agent keeps serving meanwhile.
 */
export class MasterLink {
  private readonly client: MasterInternalClient;
  private timer?: NodeJS.Timeout;
  private registered = false;
  private intervalMs: number;
  private stopped = false;
  private failures = 0;

  constructor(private readonly o: MasterLinkOptions) {
    this.client = new MasterInternalClient(o.masterAddr, { timeoutMs: 5_000, clusterToken: o.clusterToken });
    this.intervalMs = o.defaultIntervalMs ?? 5_000;
  }

  start() {
    void this.tick();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      if (!this.registered) {
        const res = await this.client.registerNode(this.o.registration());
        this.registered = true;
        if (res?.heartbeatIntervalMs > 0) this.intervalMs = Math.min(Math.max(res.heartbeatIntervalMs, 500), 60_000);
        this.o.logger.info({ master: this.o.masterAddr, nodeId: res?.nodeId }, 'registered with master');
      }
      await this.client.heartbeat(this.o.registration().nodeId, this.o.heartbeat());
      if (this.failures) this.o.logger.info({ master: this.o.masterAddr }, 'master reachable again');
      this.failures = 0;
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (status === 404 && this.registered) {
        this.registered = false;
        this.o.logger.info('master does not know this node; registering again');
        if (!this.stopped) this.timer = setTimeout(() => void this.tick(), 0).unref();
        return;
      }
      // Log the first failure and then every 12th, not every beat of an outage.
      if (this.failures++ % 12 === 0) this.o.logger.warn({ master: this.o.masterAddr, err: (err as Error).message }, 'master unreachable; will keep trying');
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), this.intervalMs).unref();
  }
}
