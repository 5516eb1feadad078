import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultConfig, egressAddressOf, silentLogger, createLogger, type SvcConfig } from '@svc/common';
import { NodeAgentClient, type ArtifactRef, type CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { startNodeAgent, type NodeAgent } from '../index.ts';
import { ResourceNames } from '../names.ts';
import { run } from '../host/exec.ts';

export const STAND_IN_ENVD = fileURLToPath(new URL('./stand-in-envd.mjs', import.meta.url));

const BUSYBOX_APPLETS = ['sh', 'ls', 'cat', 'echo', 'sleep', 'mkdir', 'wget', 'nc', 'ps', 'kill', 'grep', 'true', 'false', 'date', 'env', 'touch', 'rm', 'head', 'httpd', 'id'];

/** A small ext4 root filesystem: /bin/busybox and its applets as symlinks. */
export async function buildBusyboxImage(dir: string, extraFiles: Record<string, string> = {}): Promise<string> {
  const root = join(dir, 'rootfs-src');
  await mkdir(join(root, 'bin'), { recursive: true });
  for (const d of ['etc', 'tmp', 'root', 'proc', 'sys', 'dev']) await mkdir(join(root, d), { recursive: true });
  await copyFile('/bin/busybox', join(root, 'bin/busybox'));
  for (const a of BUSYBOX_APPLETS) await symlink('busybox', join(root, 'bin', a));
  const files = { '/etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n', '/etc/group': 'root:x:0:\n', ...extraFiles };
  for (const [p, content] of Object.entries(files)) await writeFile(join(root, p), content);
  const image = join(dir, 'rootfs.ext4');
  await run('mkfs.ext4', ['-q', '-F', '-d', root, image, '16M']);
  return image;
}

export async function sha256File(path: string): Promise<string> {
  return createHash('sha256').update(await readFile(path)).digest('hex');
}

/** Serves files over HTTP on loopback, as the master serves artifacts. */
export async function serveFiles(files: Record<string, string>): Promise<{ url: string; close(): Promise<void>; hits: () => number }> {
  let hits = 0;
  const server = http.createServer(async (req, res) => {
    const path = files[req.url ?? ''];
    if (!path) { res.statusCode = 404; return res.end(); }
    hits++;
    res.end(await readFile(path));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    hits: () => hits,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

/** The envd to inject: the real bundle built from packages/envd when it exists, else the stand-in. */
export async function envdForTests(workDir: string): Promise<{ path: string; real: boolean }> {
  const main = fileURLToPath(new URL('../../../envd/src/main.ts', import.meta.url));
  if (!existsSync(main) || process.env.SVC_TEST_ENVD === 'stand-in') return { path: STAND_IN_ENVD, real: false };
  const out = join(workDir, 'envd.mjs');
  try {
    const { build } = await import('esbuild');
    await build({
      entryPoints: [main], outfile: out, bundle: true, platform: 'node', target: 'node20', format: 'esm', logLevel: 'silent',
      banner: { js: "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);" },
      external: ['@lydell/node-pty', '@lydell/node-pty-*'],
    });
    return { path: out, real: true };
  } catch {
    return { path: STAND_IN_ENVD, real: false };
  }
}

export interface TestEnv {
  dir: string;
  image: string;
  artifact: ArtifactRef;
  server: Awaited<ReturnType<typeof serveFiles>>;
  envd: { path: string; real: boolean };
  /** Where the agent steers sandboxes' rule ports (at egressAddressOf(pool)); nothing listens unless a test does. */
  egressPorts: { http: number; https: number };
  config(over?: Partial<SvcConfig['node_agent']>): SvcConfig;
  cleanup(): Promise<void>;
}

/**
 * Everything a node-agent test needs: a busybox image served over HTTP and a config whose
 * state dir (and so resource names) and address pool belong to this test run alone.
 */
export async function makeTestEnv(name: string, pool: string): Promise<TestEnv> {
  const dir = await mkdtemp(join(tmpdir(), `natest-${name}-`));
  const image = await buildBusyboxImage(dir);
  const sha256 = await sha256File(image);
  const sizeBytes = (await stat(image)).size;
  const server = await serveFiles({ '/artifacts/busybox.ext4': image });
  const envd = await envdForTests(dir);
  const offset = Math.floor(Math.random() * 1000);
  const egressPorts = { http: 31000 + offset, https: 32000 + offset };
  return {
    dir, image, server, envd, egressPorts,
    artifact: { artifactId: `art-${name}`, sha256, sizeBytes, downloadUrl: `${server.url}/artifacts/busybox.ext4` },
    config(over = {}) {
      const cfg = defaultConfig(dir);
      // No warm pool unless a test asks for one: tests count the sandboxes they leave.
      cfg.node_agent = { ...cfg.node_agent, listen: '127.0.0.1:0', address_pool: pool, state_dir: join(dir, 'state'), warm_pool_size: 0, warm_pool_initial: 0, ...over };
      cfg.svclet_conf = { ...cfg.svclet_conf, default_cpu_count: 1, default_memory_mb: 256, default_disk_size_mb: 512 };
      // Steered traffic goes to this address and these ports, where a test may stand in for the proxy.
      cfg.egress = { ...cfg.egress, address: egressAddressOf(pool), http_port: egressPorts.http, https_port: egressPorts.https };
      return cfg;
    },
    async cleanup() {
      await server.close();
      // Never recurse into a mount: unmount what is still mounted under the test dir first.
      const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((l) => l.split(' ')[4]).filter((m) => m?.startsWith(dir + '/'));
      for (const m of mounts.reverse()) await run('umount', ['-l', m], { allowFail: true });
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export function createRequest(env: TestEnv, over: Partial<CreateSandboxOnNode> = {}): CreateSandboxOnNode {
  return {
    sandboxId: `sb${Math.random().toString(36).slice(2, 12)}`,
    templateId: 'tpl-test', artifact: env.artifact, cpuCount: 1, memoryMB: 256, diskSizeMB: 512,
    envVars: {}, allowInternetAccess: true, network: { allowOut: [], denyOut: [] }, metadata: {}, timeoutMs: 30_000,
    ...over,
  };
}

export const testLogger = () => (process.env.SVC_TEST_LOG ? createLogger('node-agent-test', { level: process.env.SVC_TEST_LOG }) : silentLogger());

/** Host resources that carry the agent's tag: what "leaves nothing behind" checks. */
export async function leftovers(stateDir: string, tag: string): Promise<Record<string, string[]>> {
  const netns = (await run('ip', ['netns', 'list'], { allowFail: true })).stdout.split('\n').filter((l) => l.includes(`svc-${tag}-`));
  const links = (await run('ip', ['-o', 'link', 'show'], { allowFail: true })).stdout.split('\n').filter((l) => l.includes(`: sv${tag}`)).map((l) => l.split(':')[1]?.trim() ?? l);
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((l) => l.split(' ')[4]).filter((m) => m?.startsWith(join(stateDir, 'instances')));
  const runsc = existsSync(join(stateDir, 'runsc')) ? await readdir(join(stateDir, 'runsc')) : [];
  const nft = sandboxRules((await run('nft', ['list', 'table', 'ip', `svc_${tag}`], { allowFail: true })).stdout);
  const cgroups = existsSync(`/sys/fs/cgroup/memory/svc-${tag}`) ? (await readdir(`/sys/fs/cgroup/memory/svc-${tag}`, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name) : [];
  const instances = existsSync(join(stateDir, 'instances')) ? await readdir(join(stateDir, 'instances')) : [];
  const loops = (await run('losetup', ['--list', '--noheadings', '--output', 'NAME,BACK-FILE'], { allowFail: true })).stdout.split('\n').filter((l) => l.includes(join(stateDir, 'instances') + '/'));
  return { netns, links, mounts, runsc, nft, cgroups, instances, loops };
}

/**
 * The lines of the agent's table that belong to a sandbox: its chains and the elements of the
 * per-sandbox maps and sets. The platform's addresses (platform_tcp, platform_pools) are the
 * node's, kept while the agent runs.
 */
function sandboxRules(table: string): string[] {
  const out: string[] = [];
  let set = '';
  for (const line of table.split('\n')) {
    const opened = /^\s*(?:set|map) (\S+) \{/.exec(line);
    if (opened) set = opened[1]!;
    else if (/^\s*chain /.test(line)) set = '';
    if (/chain sb_/.test(line) || (/elements/.test(line) && !set.startsWith('platform_'))) out.push(line.trim());
  }
  return out;
}

export function assertNothingLeft(left: Record<string, string[]>): void {
  for (const [kind, items] of Object.entries(left)) assert.deepEqual(items, [], `${kind} left behind: ${items.join(', ')}`);
}

/** A real node agent (runsc) of its own state dir and pool, with no master, for one test file. */
export interface AgentUnderTest {
  env: TestEnv;
  agent: NodeAgent;
  client: NodeAgentClient;
  stateDir: string;
  tag: string;
  /** Waits for background cleanup, then fails on anything of this agent left on the host. */
  assertClean(): Promise<void>;
  close(): Promise<void>;
}

export async function startAgentUnderTest(name: string, pool: string, over: (env: TestEnv) => Partial<SvcConfig['node_agent']> = () => ({})): Promise<AgentUnderTest> {
  const env = await makeTestEnv(name, pool);
  const cfg = env.config(over(env));
  const stateDir = cfg.node_agent.state_dir;
  const tag = new ResourceNames(stateDir).tag;
  const agent = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
  const assertClean = async () => assertNothingLeft(await agent.settled().then(() => leftovers(stateDir, tag)));
  return {
    env, agent, client: new NodeAgentClient(agent.url), stateDir, tag, assertClean,
    async close() {
      await agent.close({ destroySandboxes: true });
      await assertClean();
      await env.cleanup();
    },
  };
}
