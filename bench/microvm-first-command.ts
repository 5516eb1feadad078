/**
 * A create from the template's saved guest and the first commands after it, on the microvm
 * runtime (KVM where a guest boots, else TCG, which the table says). Under TCG a restored guest's
 * first work of each kind is slow, because a new QEMU translates it afresh: where the create's
 * own renewal of clock and random pool runs decides whether the create or the first command pays
 * (docs/runtimes.md, "Where a restore's time goes"). This bench takes both, so that a change moving
 * that cost is seen whole. It uses only the node agent's API, so it runs unchanged from a worktree
 * of an older commit, for a comparison in the same hour.
 *
 *   node --import tsx bench/microvm-first-command.ts [--n 8] [--out microvm-first-command]
 * Run as root. Prints a table and writes bench/results/<out>.json.
 */
import { readFile, mkdtemp, rm, stat as fileStat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, silentLogger } from '@svc/common';
import { NodeAgentClient, type CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { startNodeAgent } from '@svc/node-agent';
import { buildBusyboxImage, envdForTests, serveFiles, sha256File } from '@svc/node-agent/testing/fixtures';
import { numberArg, stringArg } from './lib/args.ts';
import { printTable, stat, timed, writeResult } from './lib/stats.ts';

const N = numberArg('n', 8);
const OUT = stringArg('out', 'microvm-first-command');

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-first-command-'));
  const image = await buildBusyboxImage(dir);
  const server = await serveFiles({ '/a.ext4': image });
  const envd = await envdForTests(dir);
  const cfg = defaultConfig(dir);
  cfg.node_agent = { ...cfg.node_agent, runtime: 'microvm', listen: '127.0.0.1:0', address_pool: '10.201.122.0/24', state_dir: join(dir, 'state'), warm_pool_size: 0, warm_pool_initial: 0 };
  cfg.svclet_conf = { ...cfg.svclet_conf, default_cpu_count: 1, default_memory_mb: 256, default_disk_size_mb: 512 };
  const agent = await startNodeAgent(cfg, { logger: silentLogger(), masterAddr: '', envdBundle: envd.path, livenessIntervalMs: 600_000 });
  const client = new NodeAgentClient(agent.url);
  const accel = (await readFile('/var/cache/svc/microvm-kvm.json', 'utf8').then((t) => (JSON.parse(t) as { boots: boolean }).boots, () => { /* no KVM probe result: the figures are TCG's */ return false; })) ? 'kvm' : 'tcg';
  const artifact = { artifactId: 'art-bench-first-command', sha256: await sha256File(image), sizeBytes: (await fileStat(image)).size, downloadUrl: `${server.url}/a.ext4` };
  const request = (): CreateSandboxOnNode => ({
    sandboxId: `bf${Math.random().toString(36).slice(2, 12)}`, templateId: 'bench', artifact, cpuCount: 1, memoryMB: 256, diskSizeMB: 512,
    envVars: {}, allowInternetAccess: true, network: { allowOut: [], denyOut: [] }, metadata: {}, timeoutMs: 180_000,
  });
  const creates: number[] = [];
  const firsts: number[] = [];
  const seconds: number[] = [];
  const both: number[] = [];
  try {
    // The first create boots cold and has the template's guest saved; every later one restores it.
    await client.deleteSandbox((await client.createSandbox(request())).sandboxId);
    await agent.settled();
    for (let i = 0; i < N; i++) {
      const [createMs, sb] = await timed(() => client.createSandbox(request()));
      const [firstMs, first] = await timed(() => agent.exec(sb.sandboxId, ['true']));
      const [secondMs] = await timed(() => agent.exec(sb.sandboxId, ['true']));
      if (first.code !== 0) throw new Error(`the first command failed: ${first.stderr}`);
      creates.push(createMs);
      firsts.push(firstMs);
      seconds.push(secondMs);
      both.push(createMs + firstMs);
      await client.deleteSandbox(sb.sandboxId);
    }
  } finally {
    await agent.close({ destroySandboxes: true });
    await server.close();
    await rm(dir, { recursive: true, force: true }).catch((err: Error) => console.error(`bench: cannot remove ${dir}: ${err.message}`));
  }
  const rows = {
    [`create from the template's saved guest (${accel}), ms`]: stat(creates),
    [`its first command, \`true\` through envd (${accel}), ms`]: stat(firsts),
    ['the create and its first command, ms']: stat(both),
    ['its second command, ms']: stat(seconds),
  };
  printTable(`microvm: a create and its first commands, 256 MB guest (${accel}${accel === 'tcg' ? ': software emulation, no KVM on this host' : ''}), n=${N}`, rows);
  console.log(`written ${writeResult(OUT, { accel, n: N, rows })}`);
}

await main();
