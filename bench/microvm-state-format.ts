/**
 * A microvm sandbox's pause file in the two formats QEMU offers (docs/runtimes.md, "QEMU 7.2
 * or 10"): the migration stream svc writes today (`exec:cat`, every QEMU) and QEMU 10's
 * `mapped-ram` (`file:`, RAM pages at fixed offsets in a sparse file). One running 256 MB
 * sandbox on a real node agent is saved and loaded again n times in each format, the two
 * alternating: QMP stop and the save until QEMU has ended, then QEMU started on the file until
 * the guest runs, and a command through envd at the end to show it went on.
 *
 *   node --import tsx bench/microvm-state-format.ts --qemu /path/to/qemu-10 [--n 5]
 * Run as root. Prints a table and writes bench/results/microvm-state-format.json.
 */
import { mkdtemp, readFile, rm, stat as fileStat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, silentLogger } from '@svc/common';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { startNodeAgent } from '@svc/node-agent';
import { buildBusyboxImage, envdForTests, serveFiles, sha256File } from '@svc/node-agent/testing/fixtures';
import { endQemu, qemuPid, startQemu, withQmp } from '../packages/node-agent/src/runtime/microvm/qemu-process.ts';
import type { InstanceRef } from '../packages/node-agent/src/runtime/driver.ts';
import { qemuFeatures } from '../packages/node-agent/src/runtime/microvm/qemu-features.ts';
import { numberArg, stringArg } from './lib/args.ts';
import { printTable, sleep, stat, writeResult, type Stat } from './lib/stats.ts';

const N = numberArg('n', 5);
const QEMU = stringArg('qemu', 'qemu-system-x86_64');
type Format = 'stream' | 'mapped-ram';

async function untilStatus(ref: InstanceRef, done: (s: string) => boolean): Promise<void> {
  const deadline = Date.now() + 120_000;
  await withQmp(ref, async (q) => {
    while (!done((await q.execute<{ status: string }>('query-status')).status)) {
      if (Date.now() > deadline) throw new Error('QEMU did not get there within 120 s');
      await sleep(5);
    }
  });
}

/** Stops the guest, writes its state in `format` and ends QEMU: the time until it has ended. */
async function save(ref: InstanceRef, file: string, format: Format): Promise<number> {
  await rm(file, { force: true });
  const started = Date.now();
  await withQmp(ref, async (q) => {
    await q.execute('stop');
    await q.execute('migrate-set-capabilities', { capabilities: [{ capability: 'mapped-ram', state: format === 'mapped-ram' }] });
    await q.execute('migrate', { uri: format === 'mapped-ram' ? `file:${file}` : `exec:cat > ${file}` });
    while (true) {
      const m = await q.execute<{ status?: string; 'error-desc'?: string }>('query-migrate');
      if (m.status === 'completed') break;
      if (m.status === 'failed') throw new Error(`save failed: ${m['error-desc']}`);
      await sleep(5);
    }
    await q.execute('quit').catch(() => { /* QEMU may close the socket before answering quit */ });
  });
  while (await qemuPid(ref)) await sleep(5);
  return Date.now() - started;
}

/** QEMU started on the file until the guest runs. */
async function load(ref: InstanceRef, argv: string[], file: string, format: Format): Promise<number> {
  const started = Date.now();
  await startQemu(QEMU, ref, argv, 'defer');
  await withQmp(ref, async (q) => {
    await q.execute('migrate-set-capabilities', { capabilities: [{ capability: 'mapped-ram', state: format === 'mapped-ram' }] });
    await q.execute('migrate-incoming', { uri: format === 'mapped-ram' ? `file:${file}` : `exec:cat ${file}` });
  });
  await untilStatus(ref, (s) => s !== 'inmigrate');
  await withQmp(ref, (q) => q.execute('cont'));
  await untilStatus(ref, (s) => s === 'running');
  return Date.now() - started;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-state-format-'));
  const image = await buildBusyboxImage(dir);
  const server = await serveFiles({ '/a.ext4': image });
  const envd = await envdForTests(dir);
  const cfg = defaultConfig(dir);
  cfg.node_agent = { ...cfg.node_agent, runtime: 'microvm', listen: '127.0.0.1:0', address_pool: '10.201.121.0/24', state_dir: join(dir, 'state'), warm_pool_size: 0, warm_pool_initial: 0, qemu_binary: QEMU };
  const agent = await startNodeAgent(cfg, { logger: silentLogger(), masterAddr: '', envdBundle: envd.path, livenessIntervalMs: 600_000 });
  const client = new NodeAgentClient(agent.url);
  const artifact = { artifactId: 'art-bench-state', sha256: await sha256File(image), sizeBytes: (await fileStat(image)).size, downloadUrl: `${server.url}/a.ext4` };
  const times: Record<Format, { save: number[]; load: number[]; sizeMB: number[]; allocatedMB: number[] }> = {
    stream: { save: [], load: [], sizeMB: [], allocatedMB: [] }, 'mapped-ram': { save: [], load: [], sizeMB: [], allocatedMB: [] },
  };
  try {
    // A cold create: its RAM is its own (a clone's would be its template's file).
    const sb = await client.createSandbox({
      sandboxId: 'bstateformat', templateId: 'bench', artifact, cpuCount: 1, memoryMB: 256, diskSizeMB: 512,
      envVars: {}, allowInternetAccess: true, network: { allowOut: [], denyOut: [] }, metadata: {}, timeoutMs: 180_000,
    });
    const info = agent.inspect(sb.sandboxId);
    const ref: InstanceRef = { instanceId: info.instanceId, dir: info.dir, netnsPath: `/run/netns/${info.netns}` };
    const argv = (JSON.parse(await readFile(join(info.dir, 'launch.json'), 'utf8')) as { argv: string[] }).argv;
    // The guest's page cache as a user's would be after some work: 64 MB read from /dev/urandom into /tmp.
    const fill = await agent.exec(sb.sandboxId, ['sh', '-c', 'dd if=/dev/urandom of=/tmp/fill bs=1048576 count=64 2>&1 && sync']);
    if (fill.code !== 0) throw new Error(`filling the guest's page cache failed: ${fill.stdout} ${fill.stderr}`);
    const file = join(dir, 'state.bin');
    for (let i = 0; i < N; i++) {
      for (const format of (i % 2 ? ['mapped-ram', 'stream'] : ['stream', 'mapped-ram']) as Format[]) {
        times[format].save.push(await save(ref, file, format));
        const st = await fileStat(file);
        times[format].sizeMB.push(st.size / 1024 / 1024);
        times[format].allocatedMB.push(st.blocks * 512 / 1024 / 1024);
        times[format].load.push(await load(ref, argv, file, format));
      }
    }
    const alive = await agent.exec(sb.sandboxId, ['sh', '-c', 'wc -c < /tmp/fill']);
    if (alive.stdout.trim() !== String(64 * 1024 * 1024)) throw new Error(`the guest did not go on with its files: ${alive.stdout} ${alive.stderr}`);
    await endQemu(ref);
    await client.deleteSandbox(sb.sandboxId);
  } finally {
    await agent.close({ destroySandboxes: true });
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
  const { version } = await qemuFeatures(QEMU);
  const rows: Record<string, Stat> = {};
  for (const f of ['stream', 'mapped-ram'] as Format[]) {
    rows[`save (stop, write, QEMU ended), ${f}, ms`] = stat(times[f].save);
    rows[`load (QEMU started until the guest runs), ${f}, ms`] = stat(times[f].load);
    rows[`file size, ${f}, MB`] = stat(times[f].sizeMB);
    rows[`file blocks on disk, ${f}, MB`] = stat(times[f].allocatedMB);
  }
  printTable(`a 256 MB microvm guest's saved state, ${version} (TCG where KVM is missing), n=${N}`, rows);
  console.log(`written ${writeResult('microvm-state-format', { qemu: version, n: N, rows })}`);
}

await main();
