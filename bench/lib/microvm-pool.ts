import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { silentLogger, type SvcConfig } from '@svc/common';
import { NodeAgentClient, type CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { startNodeAgent } from '@svc/node-agent';
import { sleep, stat, timed, type Stat } from './stats.ts';

/** What bench/microvm.ts measures of the microvm warm pool (clones parked on their template's memory file). */
export interface PoolFigures {
  /** Create that takes a parked clone: its device state read, the clock renewed, envd's /init. */
  createMs: Stat;
  /** A parked clone's QEMU before it is handed out: resident and proportional set size, MB. */
  parkedRssMB: Stat;
  parkedPssMB: Stat;
}

/** QEMU processes whose command line names this state dir. */
async function qemuPids(stateDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* it ended while /proc was read */ return ''; });
    if (cmdline.split('\0')[0]!.includes('qemu-system') && cmdline.includes(stateDir)) pids.push(Number(pid));
  }
  return pids;
}

/**
 * A node agent of its own (state dir `<dir>/pool-state`) with a pool of one parked clone: the
 * pool fills (the template's saved guest made first), then `n` times a create takes the parked
 * clone once it is there again, with the parked QEMU's memory read just before.
 */
export async function measurePool(o: { cfg: SvcConfig; dir: string; envdBundle: string; request: () => CreateSandboxOnNode; n: number }): Promise<PoolFigures> {
  const stateDir = join(o.dir, 'pool-state');
  const cfg: SvcConfig = { ...o.cfg, node_agent: { ...o.cfg.node_agent, state_dir: stateDir, warm_pool_size: 1, warm_pool_initial: 1, warm_pool_max: 1 } };
  const agent = await startNodeAgent(cfg, { logger: silentLogger(), masterAddr: '', envdBundle: o.envdBundle, livenessIntervalMs: 600_000 });
  const client = new NodeAgentClient(agent.url);
  const creates: number[] = [];
  const rss: number[] = [];
  const pss: number[] = [];
  try {
    const req = o.request();
    const { artifactId, ...artifact } = req.artifact;
    await client.ensureArtifact(artifactId, artifact);
    for (let i = 0; i < o.n; i++) {
      const deadline = Date.now() + 300_000;
      // The pool's one clone is parked when its QEMU is the only one of this state dir.
      while (agent.warmCount() !== 1 || (await qemuPids(stateDir)).length !== 1) {
        if (Date.now() > deadline) throw new Error('the warm pool did not fill within 300 s');
        await sleep(50);
      }
      const [pid] = await qemuPids(stateDir);
      const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
      const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? 0);
      rss.push(kb('Rss') / 1024);
      pss.push(kb('Pss') / 1024);
      const [ms, sb] = await timed(() => client.createSandbox(o.request()));
      creates.push(ms);
      await client.deleteSandbox(sb.sandboxId);
    }
  } finally {
    await agent.close({ destroySandboxes: true });
  }
  return { createMs: stat(creates), parkedRssMB: stat(rss), parkedPssMB: stat(pss) };
}
