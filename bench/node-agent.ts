/**
 * Node agent on gVisor, measured on one small busybox ext4 rootfs (built here):
 *   (a) floor: raw `runsc run --detach` in a prepared netns until envd answers /health
 *   (b) node-agent create until envd answers: cold, and from the warm pool
 *   (c) pause and resume (freeze) through the API
 *   (d) host memory per idle sandbox (used-memory delta over N sandboxes) and the count that fits 24 GiB
 *   (e) `runsc exec echo` vs envd process.Start echo round trip
 *   (f) the disk cap alone: make and mount a sandbox's 512 MB ext4 writable layer, and remove it
 *
 *   node --import tsx bench/node-agent.ts [--n 10] [--idle 20]
 * Run as root. Prints a table and writes bench/results/node-agent.json.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultConfig, silentLogger, type SvcConfig } from '@svc/common';
import { NodeAgentClient, type NodeSandbox } from '@svc/contracts/node-agent';
import { run } from '../packages/node-agent/src/host/exec.ts';
import { startNodeAgent, type NodeAgent } from '@svc/node-agent';
import { ResourceNames } from '../packages/node-agent/src/names.ts';
import { DiskLayer } from '../packages/node-agent/src/runtime/disk-layer.ts';
import { buildBusyboxImage, envdForTests, serveFiles, sha256File } from '@svc/node-agent/testing/fixtures';
import { measureRunscFloor } from './lib/runsc-floor.ts';
import { printTable, ratio, sleep, stat, timed, usedMemoryMB, writeResult } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = numberArg('n', 10);
const IDLE = Math.max(20, numberArg('idle', 20));
const POOL = '10.201.100.0/24';

/** One envelope of the Connect streaming protocol: flags byte, big-endian length, JSON. */
function envelope(msg: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(msg));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

/** envd process.Start of `echo hi`, read to the end of the stream; returns the stdout seen. */
async function envdEcho(address: string): Promise<string> {
  const res = await fetch(`http://${address}:49983/process.Process/Start`, {
    method: 'POST',
    headers: { 'content-type': 'application/connect+json', 'connect-protocol-version': '1' },
    body: envelope({ process: { cmd: '/bin/echo', args: ['hi'] }, stdin: false }),
  });
  const buf = Buffer.from(await res.arrayBuffer());
  let out = '';
  for (let o = 0; o + 5 <= buf.length;) {
    const len = buf.readUInt32BE(o + 1);
    const msg = JSON.parse(buf.subarray(o + 5, o + 5 + len).toString()) as { event?: { data?: { stdout?: string } }; error?: { message: string } };
    if (msg.error) throw new Error(`envd: ${msg.error.message}`);
    if (msg.event?.data?.stdout) out += Buffer.from(msg.event.data.stdout, 'base64').toString();
    o += 5 + len;
  }
  return out;
}

function agentConfig(dir: string, name: string, warm: number): SvcConfig {
  const cfg = defaultConfig(dir);
  cfg.node_agent = { ...cfg.node_agent, listen: '127.0.0.1:0', address_pool: POOL, state_dir: join(dir, name), warm_pool_size: warm, warm_pool_initial: 0 };
  cfg.svclet_conf = { ...cfg.svclet_conf, default_cpu_count: 1, default_memory_mb: 256, default_disk_size_mb: 512 };
  return cfg;
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root');
  const dir = join(tmpdir(), `nabench-${process.pid}`);
  await mkdir(dir, { recursive: true });
  const image = await buildBusyboxImage(dir);
  const artifact = { artifactId: 'art-bench', sha256: await sha256File(image), sizeBytes: (await readFile(image)).length, downloadUrl: '' };
  const server = await serveFiles({ '/a.ext4': image });
  artifact.downloadUrl = `${server.url}/a.ext4`;
  const built = existsSync(join(root, 'dist/envd.mjs')) ? { path: join(root, 'dist/envd.mjs'), real: true } : await envdForTests(dir);
  const results: Record<string, unknown> = {
    when: new Date().toISOString(),
    host: { node: process.version, runsc: (await run('runsc', ['--version'])).stdout.split('\n')[0], cpus: cpus().length, loadavgAtStart: loadavg().map((l) => Math.round(l * 100) / 100) },
    envd: built.real ? built.path : 'stand-in (packages/envd not built)', image: { bytes: artifact.sizeBytes },
  };
  const agents: NodeAgent[] = [];
  const req = (over: object = {}) => ({
    sandboxId: `b${Math.random().toString(36).slice(2, 12)}`, templateId: 'tpl-bench', artifact, cpuCount: 1, memoryMB: 256, diskSizeMB: 512,
    envVars: {}, allowInternetAccess: false, network: { allowOut: [], denyOut: [] }, metadata: {}, timeoutMs: 60_000, ...over,
  });
  try {
    // ---- (b, c, d, e) agent without a warm pool
    const cold = await startNodeAgent(agentConfig(dir, 'cold', 0), { logger: silentLogger(), masterAddr: '', envdBundle: built.path, livenessIntervalMs: 600_000 });
    agents.push(cold);
    const c = new NodeAgentClient(cold.url, { timeoutMs: 120_000 });
    const { artifactId, ...ensure } = artifact;
    await c.ensureArtifact(artifactId, ensure);
    await c.deleteSandbox((await c.createSandbox(req())).sandboxId); // runtime dir assembled, caches warm

    const coldMs: number[] = [];
    for (let i = 0; i < N; i++) {
      const [ms, sb] = await timed(() => c.createSandbox(req()));
      coldMs.push(ms);
      await c.deleteSandbox(sb.sandboxId);
    }

    const sb = await c.createSandbox(req());
    const pauseMs: number[] = [];
    const resumeMs: number[] = [];
    for (let i = 0; i < N; i++) {
      pauseMs.push((await timed(() => c.pauseSandbox(sb.sandboxId)))[0]);
      resumeMs.push((await timed(() => c.resumeSandbox(sb.sandboxId)))[0]);
    }
    const deleteMs: number[] = [];

    const execMs: number[] = [];
    const envdMs: number[] = [];
    let envdOut = '';
    for (let i = 0; i < N; i++) {
      const [ms, r] = await timed(() => cold.exec(sb.sandboxId, ['echo', 'hi']));
      if (r.stdout.trim() !== 'hi') throw new Error(`runsc exec echo: ${JSON.stringify(r)}`);
      execMs.push(ms);
      if (built.real) {
        const [ems, out] = await timed(() => envdEcho(sb.address));
        envdOut = out;
        envdMs.push(ems);
      }
    }
    if (built.real && envdOut.trim() !== 'hi') throw new Error(`envd echo printed ${JSON.stringify(envdOut)}`);
    deleteMs.push((await timed(() => c.deleteSandbox(sb.sandboxId)))[0]);

    // ---- (d) memory per idle sandbox
    await cold.settled();
    await sleep(1000);
    const before = usedMemoryMB(await readFile('/proc/meminfo', 'utf8'));
    const idle: NodeSandbox[] = [];
    for (let i = 0; i < IDLE; i++) idle.push(await c.createSandbox(req()));
    await sleep(3000);
    const afterMB = usedMemoryMB(await readFile('/proc/meminfo', 'utf8'));
    const perSandboxMB = (afterMB - before) / IDLE;
    // Cross-checks that other processes on the host cannot disturb: the sandboxes' own
    // processes (proportional set size) and their memory cgroups.
    const tag = new ResourceNames(join(dir, 'cold')).tag;
    let pssKB = 0;
    let cgroupBytes = 0;
    for (const s of idle) {
      const cg = `/sys/fs/cgroup/memory/svc-${tag}/svc-${tag}-${cold.inspect(s.sandboxId).instanceId}`;
      cgroupBytes += Number(await readFile(`${cg}/memory.usage_in_bytes`, 'utf8'));
      for (const pid of (await readFile(`${cg}/cgroup.procs`, 'utf8')).split('\n').filter(Boolean)) {
        const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => { /* the process exited since the listing: no memory */ return ''; });
        pssKB += Number(/^Pss:\s+(\d+)/m.exec(rollup)?.[1] ?? 0);
      }
    }
    for (const s of idle) deleteMs.push((await timed(() => c.deleteSandbox(s.sandboxId)))[0]);

    // ---- (b) warm pool
    const warm = await startNodeAgent(agentConfig(dir, 'warm', 1), { logger: silentLogger(), masterAddr: '', envdBundle: built.path, livenessIntervalMs: 600_000 });
    agents.push(warm);
    const w = new NodeAgentClient(warm.url, { timeoutMs: 120_000 });
    await w.ensureArtifact(artifactId, ensure);
    const warmMs: number[] = [];
    for (let i = 0; i < N; i++) {
      while (warm.warmCount() < 1) await sleep(10);
      const [ms, s] = await timed(() => w.createSandbox(req({ envVars: { K: 'v' }, envdAccessToken: 'tok' })));
      if (!s.fromWarmPool) throw new Error('warm create did not come from the pool');
      warmMs.push(ms);
      await w.deleteSandbox(s.sandboxId);
    }

    // ---- (a) floor: raw runsc run in a prepared namespace until envd answers
    const floorMs = await measureRunscFloor({ image, envdBundle: built.path, workDir: join(dir, 'floor'), pool: '10.201.101.0/24', n: N });

    // ---- (f) disk cap: part of every cold create above (and of every warm-pool start)
    const diskMakeMs: number[] = [];
    const diskRemoveMs: number[] = [];
    for (let i = 0; i < N; i++) {
      const layer = new DiskLayer(join(dir, 'disk-bench', String(i)));
      diskMakeMs.push((await timed(() => layer.create(512 * 1024 * 1024)))[0]);
      diskRemoveMs.push((await timed(() => layer.destroy()))[0]);
    }
    await rm(join(dir, 'disk-bench'), { recursive: true, force: true });

    const table = {
      'floor: runsc run → envd /health (ms)': stat(floorMs),
      'agent create, cold → envd answers (ms)': stat(coldMs),
      'agent create, warm pool (ms)': stat(warmMs),
      'pause, freeze (ms)': stat(pauseMs),
      'resume, freeze (ms)': stat(resumeMs),
      'delete (ms)': stat(deleteMs),
      'runsc exec echo (ms)': stat(execMs),
      ...(envdMs.length ? { 'envd process.Start echo (ms)': stat(envdMs) } : {}),
      'disk cap: mkfs + loop mount, 512 MB (ms)': stat(diskMakeMs),
      'disk cap: unmount + remove (ms)': stat(diskRemoveMs),
    };
    const memory = {
      idleSandboxes: IDLE,
      usedDeltaMB: Math.round((afterMB - before) * 10) / 10,
      perSandboxMB: Math.round(perSandboxMB * 10) / 10,
      fitIn24GiB: Math.floor((24 * 1024) / perSandboxMB),
      pssPerSandboxMB: Math.round((pssKB / 1024 / IDLE) * 10) / 10,
      cgroupPerSandboxMB: Math.round((cgroupBytes / 1048576 / IDLE) * 10) / 10,
    };
    const floorP50 = table['floor: runsc run → envd /health (ms)'].p50;
    const ratios = {
      coldOverFloorP50: ratio(table['agent create, cold → envd answers (ms)'].p50, floorP50),
      warmOverFloorP50: ratio(table['agent create, warm pool (ms)'].p50, floorP50),
    };
    Object.assign(results, { latency: table, memory, ratios });

    const host = results.host as { runsc: string; cpus: number; loadavgAtStart: number[] };
    printTable(`node agent on gVisor (${host.runsc}, ptrace), ${host.cpus} CPUs, load at start ${host.loadavgAtStart[0]}, busybox ext4 ${artifact.sizeBytes >> 20} MiB, envd: ${built.real ? 'real' : 'stand-in'}`, table);
    console.log(`memory: ${memory.usedDeltaMB} MB used by ${IDLE} idle sandboxes → ${memory.perSandboxMB} MB each → ${memory.fitIn24GiB} fit in 24 GiB`);
    console.log(`        cross-checks per sandbox: PSS of its processes ${memory.pssPerSandboxMB} MB, memory cgroup ${memory.cgroupPerSandboxMB} MB (host used-memory delta includes other processes' noise)`);
    console.log(`ratios (p50): cold create / floor = ${ratios.coldOverFloorP50}, warm create / floor = ${ratios.warmOverFloorP50}`);
    console.log(`wrote ${writeResult('node-agent', results)}`);
  } finally {
    for (const a of agents) await a.close({ destroySandboxes: true }).catch((e) => console.error(e));
    await server.close();
    await rm(dir, { recursive: true, force: true }).catch((err: Error) => console.error(`node-agent bench: could not remove ${dir}: ${err.message}`));
  }
}

await main();
