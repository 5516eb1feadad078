import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CreateSandboxOnNode, NodeAgentClient } from '@svc/contracts/node-agent';
import type { NodeAgent } from '@svc/node-agent';
import { templateMemoryChecksum } from '../../packages/node-agent/src/runtime/microvm/template-memory.ts';
import { stat, timed, type Stat } from './stats.ts';

/** What bench/microvm.ts measures of clones that share their template's memory file. */
export interface CloneFigures {
  /** Create from the template's saved guest, per guest size in MB. */
  createBySize: Record<string, Stat>;
  /** QEMU's proportional set size per idle clone, MB. */
  pssMB: Stat;
  /** Of that, the clone's own pages (private clean and dirty), MB. */
  privateMB: Stat;
  clones: number;
  checksumUnchanged: boolean;
  randomDiffers: boolean;
}

async function smapsRollup(pidFile: string): Promise<{ pssMB: number; privateMB: number }> {
  const pid = (await readFile(pidFile, 'utf8')).trim();
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
  return { pssMB: kb('Pss') / 1024, privateMB: (kb('Private_Clean') + kb('Private_Dirty')) / 1024 };
}

/** The saved template guests' directories under the node's templates (one per size measured). */
async function savedTemplates(templatesDir: string): Promise<string[]> {
  return (await readdir(templatesDir).catch(() => { /* no saved guest was made: nothing to checksum */ return [] as string[]; })).filter((n) => !n.includes('.tmp-')).map((n) => join(templatesDir, n));
}

/**
 * For each size: a cold create (which has the template's guest saved), then `n` creates from
 * it. Then `clones` idle clones of the first size at once: their PSS, two of them drawing random
 * numbers at the same moment, and the template's memory file checksummed after their kills.
 */
export async function measureClones(o: {
  agent: NodeAgent; client: NodeAgentClient; request: (memoryMB: number) => CreateSandboxOnNode; templatesDir: string;
  sizesMB: number[]; n: number; clones: number;
}): Promise<CloneFigures> {
  const { agent, client } = o;
  const createBySize: Record<string, Stat> = {};
  for (const size of o.sizesMB) {
    await client.deleteSandbox((await client.createSandbox(o.request(size))).sandboxId);
    await agent.settled();
    const times: number[] = [];
    for (let i = 0; i < o.n; i++) {
      const [ms, sb] = await timed(() => client.createSandbox(o.request(size)));
      times.push(ms);
      await client.deleteSandbox(sb.sandboxId);
    }
    createBySize[String(size)] = stat(times);
  }
  const size = o.sizesMB[0]!;
  const running = [];
  for (let i = 0; i < o.clones; i++) running.push(await client.createSandbox(o.request(size)));
  const pss: number[] = [];
  const own: number[] = [];
  let randomDiffers = false;
  try {
    // Idle for a moment: what the create touched is in, and nothing else runs.
    await new Promise((r) => setTimeout(r, 3_000));
    for (const sb of running) {
      const m = await smapsRollup(join(agent.inspect(sb.sandboxId).dir, 'qemu.pid'));
      pss.push(m.pssMB);
      own.push(m.privateMB);
    }
    const draw = (id: string) => agent.exec(id, ['busybox', 'od', '-An', '-tx1', '-N16', '/dev/urandom']).then((r) => r.stdout.trim());
    const [a, b] = await Promise.all([draw(running[0]!.sandboxId), draw(running[1]!.sandboxId)]);
    randomDiffers = a !== '' && a !== b;
  } finally {
    for (const sb of running) await client.deleteSandbox(sb.sandboxId);
  }
  let checksumUnchanged = true;
  for (const dir of await savedTemplates(o.templatesDir)) {
    const sum = await templateMemoryChecksum(dir);
    checksumUnchanged &&= sum.recorded !== undefined && sum.recorded === sum.now;
  }
  return { createBySize, pssMB: stat(pss), privateMB: stat(own), clones: o.clones, checksumUnchanged, randomDiffers };
}
