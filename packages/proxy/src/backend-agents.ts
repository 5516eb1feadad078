import { Agent } from 'node:http';

/**
 * One keep-alive Agent per backend address (a sandbox IP), so connections to a sandbox are
 * reused across requests and one sandbox's pool never starves another's.
 */
export class BackendAgents {
  private readonly agents = new Map<string, Agent>();
  private readonly reaper: NodeJS.Timeout;

  constructor(private readonly idleSocketMs: number) {
    this.reaper = setInterval(() => this.dropUnused(), 30_000);
    this.reaper.unref();
  }

  for(address: string): Agent {
    let agent = this.agents.get(address);
    if (agent === undefined) {
      agent = new Agent({
        keepAlive: true,
        // Closes our idle sockets before a typical backend (node: 5 s) closes its side, so a
        // request is rarely written into a socket the backend is just closing.
        timeout: this.idleSocketMs,
        maxSockets: Infinity,
        maxFreeSockets: 256,
        scheduling: 'lifo',
        noDelay: true,
      } as ConstructorParameters<typeof Agent>[0]);
      this.agents.set(address, agent);
    }
    return agent;
  }

  /**
   * Closes the idle connections to an address. Called when a sandbox's route is purged: after
   * a pause and resume its old connections may lead nowhere.
   */
  dropIdle(address: string): void {
    const agent = this.agents.get(address);
    if (agent === undefined) return;
    for (const list of Object.values(agent.freeSockets)) for (const s of list ?? []) s.destroy();
  }

  closeAll(): void {
    clearInterval(this.reaper);
    for (const a of this.agents.values()) a.destroy();
    this.agents.clear();
  }

  private dropUnused() {
    for (const [address, agent] of this.agents) {
      const busy = Object.keys(agent.sockets).length + Object.keys(agent.freeSockets).length + Object.keys(agent.requests).length;
      if (busy === 0) { agent.destroy(); this.agents.delete(address); }
    }
  }
}
