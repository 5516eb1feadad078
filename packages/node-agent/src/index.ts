import { mkdir } from 'node:fs/promises';
import { makeDirPrivate } from '@svc/common';
import { join } from 'node:path';
import { clusterTlsOf, createHttpApp, egressAddressOf, internalScheme, parseEgressResolve, parseListen, Periodic, SvcError, warmPoolStart, type Logger, type SvcConfig } from '@svc/common';
import type { NodeInfo, RuntimeKind } from '@svc/contracts/node-agent';
import type { PlatformAddresses } from '@svc/contracts/egress';
import { ArtifactStore } from './artifacts/artifact-store.ts';
import { LayerStore } from './artifacts/layer-store.ts';
import { enableIpForwarding, raisePidMax, missingTools, nodeCapacity, resolveNodeId, sandboxResolvConf } from './host/host-facts.ts';
import type { RunResult } from './host/exec.ts';
import { ExecInputs } from './artifacts/exec-input.ts';
import { MasterLink } from './master-link.ts';
import { MetricsSampler } from './sandboxes/metrics-sampler.ts';
import { clusterHeaders } from '@svc/contracts/cluster-token';
import { MetricsHistoryClient } from '@svc/contracts/metrics-history';
import { ResourceNames } from './names.ts';
import { AddressPool } from './network/address-pool.ts';
import { readHostNetwork } from './network/host-conflicts.ts';
import { Firewall } from './network/firewall.ts';
import { PlatformList, platformAddressesOf } from './network/platform-list.ts';
import { requireNodeToken } from './node-token.ts';
import { ensureEgressAddress, removeEgressAddress } from './network/egress-link.ts';
import { HostLearner } from './network/host-learner.ts';
import { registerRoutes } from './routes.ts';
import { chooseDrivers } from './runtime/choose-drivers.ts';
import { parseLabelList } from '@svc/contracts/node-labels';
import { defaultEnvdBundle, defaultPtyModulesDir, defaultNativeFile, ensureRuntimeBundle, SANDBOX_INIT, type RuntimeBundle } from './runtime/runtime-bundle.ts';
import { InstanceLauncher } from './sandboxes/instances.ts';
import { RecordStore } from './sandboxes/record.ts';
import { reconcile } from './sandboxes/reconcile.ts';
import { NodeSandboxes } from './sandboxes/node-sandboxes.ts';
import { collectWarmPoolMetrics } from './sandboxes/warm-pool-metrics.ts';
import { NodeArtifacts } from './artifacts/node-artifacts.ts';
import { MemoryAdmission } from './sandboxes/memory-admission.ts';
import { MemoryWatch } from './sandboxes/memory-watch.ts';
import { defaultReserveMB, MemoryGauge } from './host/memory-gauge.ts';
import { ENVD_VERSION } from '@svc/contracts/envd-version';
import { NODE_AGENT_VERSION } from './version.ts';
import { randomBytes } from 'node:crypto';
import { registerVolumeContentRoutes, VolumePluginRegistry } from '@svc/volumes';
import { decodeVolumeHeader, NODE_FEATURE_VOLUMES, VOLUME_HEADER } from '@svc/contracts/volumes';
import { VolumeAttachments } from './volumes/attachments.ts';

export { probeHost, type HostProbes } from './runtime/host-probe.ts';

export interface NodeAgentOptions {
  logger: Logger;
  /** Master base URL; default `master.addr` from the config; '' runs without a master. */
  masterAddr?: string;
  /** envd bundle to inject (default: dist/envd.mjs, or SVC_ENVD_BUNDLE). */
  envdBundle?: string;
  /** runsc binary (default: runsc on PATH). */
  runscPath?: string;
  /** How often sandboxes are probed for dead processes (default 5 s). */
  livenessIntervalMs?: number;
  /** Where the platform's addresses come from (default: the master's list; none without a master). */
  platformAddresses?: () => Promise<PlatformAddresses>;
}

export interface NodeAgent {
  url: string;
  nodeId: string;
  /** The runtime this node chose as its default (node_agent.runtime, docs/runtimes.md). */
  runtime: RuntimeKind;
  /** Every runtime it offers, the default first. */
  runtimes: RuntimeKind[];
  /** Stops serving. Warm sandboxes are destroyed; user sandboxes keep running (and are adopted at the next start) unless destroySandboxes. */
  close(opts?: { destroySandboxes?: boolean }): Promise<void>;
  /** For tests and benchmarks: run a command in a sandbox beside envd. */
  exec(sandboxId: string, argv: string[], opts?: { detach?: boolean }): Promise<RunResult>;
  /** For tests: the host-side facts of a sandbox. */
  inspect(sandboxId: string): { instanceId: string; dir: string; netns: string; hostVeth: string; address: string };
  /** Resolves when background cleanup (cgroups of killed sandboxes) is done. */
  settled(): Promise<void>;
  /** For tests: look for dead sandboxes now. */
  sweepDead(): Promise<void>;
  warmCount(): number;
  /** One round of the metrics sampler now (bench/sampler.ts); with a master it also runs every 5 s on its own. */
  sampleMetrics(): Promise<void>;
  /** Reads the platform's addresses now (every 30 s on its own) and drops sandboxes' packets to them. */
  refreshPlatformAddresses(): Promise<void>;
}

export async function startNodeAgent(cfg: SvcConfig, opts: NodeAgentOptions): Promise<NodeAgent> {
  const nc = cfg.node_agent;
  const logger = opts.logger;
  if (process.getuid?.() !== 0) throw new Error('the node agent runs sandboxes and must run as root');
  const missing = missingTools(['nsenter', 'ip', 'nft', 'mount', 'umount', 'ldd', 'prlimit', SANDBOX_INIT]);
  if (missing.length) throw new Error(`node agent: missing host tools: ${missing.join(', ')} (scripts/install-system-deps.sh installs them)`);

  const stateDir = nc.state_dir;
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const nodeId = await resolveNodeId(nc.node_id, stateDir);
  // Checked by the label rules before anything starts: a bad one stops the agent, naming it.
  const labels = parseLabelList(nc.labels, 'node_agent.labels');
  const names = new ResourceNames(stateDir);
  const addresses = new AddressPool(nc.address_pool, () => readHostNetwork(names.vethPrefix));
  const wider = addresses.widerRoutes();
  if (wider.length) logger.warn({ pool: addresses.cidr, interfaces: wider }, 'the address pool overlaps a network the host routes to: sandboxes hide those addresses of it; choose node_agent.address_pool outside it');
  const eg = { ...cfg.egress, address: cfg.egress.address || egressAddressOf(nc.address_pool) };
  if (eg.enabled) {
    // The proxy's address may sit in the pool (its first /30 by default): no sandbox gets that /30.
    addresses.reserveAddress(eg.address);
    await ensureEgressAddress(eg.address);
  }
  const masterAddr = opts.masterAddr ?? cfg.master.addr;
  const platformSource = opts.platformAddresses ?? (masterAddr ? platformAddressesOf(masterAddr, cfg.cluster_token) : undefined);
  // Each needs the other: the list applies itself to the firewall, which waits for the first list.
  const platform: PlatformList = new PlatformList({ source: platformSource, file: join(stateDir, 'platform-addresses.json'), apply: (list): Promise<void> => firewall.setPlatform(list), logger });
  const firewall: Firewall = new Firewall(
    names.nftTable, names.vethPrefix, addresses.cidr,
    eg.enabled ? { address: eg.address, httpPort: eg.http_port, httpsPort: eg.https_port, tunnelPort: eg.tunnel_port, tunnelAll: !!eg.upstream_proxy } : undefined,
    () => platform.ready(),
    cfg.node_agent.host.quota.max_connections_per_sandbox,
  );
  // Before the firewall is rebuilt (reconcile): adopted sandboxes get the list from the start.
  await platform.start();
  const records = new RecordStore(join(stateDir, 'instances'));
  const downloads = masterAddr ? { baseUrl: masterAddr, clusterToken: cfg.cluster_token } : undefined;
  const artifacts = new ArtifactStore(join(stateDir, 'artifacts'), logger, downloads);
  const layers = new LayerStore(join(stateDir, 'layers'), logger, downloads);
  const execInputs = new ExecInputs(join(stateDir, 'exec-inputs'), downloads);
  // The sandboxes come later; the microvm driver asks them for a guest's envd token only when it runs a command.
  const late: { sandboxes?: NodeSandboxes } = {};
  const { drivers, platforms } = await chooseDrivers({
    runtime: nc.runtime, guestKernelDir: nc.guest_kernel_dir, qemuBinary: nc.qemu_binary, stateDir, names, logger, runscPath: opts.runscPath,
    envdTokenOf: (instanceId) => late.sandboxes?.envdToken(instanceId),
  });
  const capacity = nodeCapacity(nc.capacity);
  const ratio = nc.host.quota.paused_resource_release_ratio;
  const memoryQuotaMB = Math.floor(capacity.memoryMB * nc.host.quota.memory_overcommit);

  await enableIpForwarding(logger);
  await raisePidMax(logger);
  await artifacts.load();
  await layers.load();

  let bundle: Promise<RuntimeBundle> | undefined;
  const runtimeBundle = () => {
    bundle ??= (async () => {
      const envdBundle = opts.envdBundle ?? defaultEnvdBundle();
      if (!envdBundle) throw new SvcError(503, 'envd bundle not found: run `npm run build` (dist/envd.mjs) or set SVC_ENVD_BUNDLE');
      return ensureRuntimeBundle(stateDir, { envdBundle, nodeBinary: process.execPath, init: SANDBOX_INIT, statShim: defaultNativeFile(envdBundle, 'svc-stat-shim.so', process.env.SVC_STAT_SHIM), sudo: defaultNativeFile(envdBundle, 'svc-sudo', process.env.SVC_SUDO_HELPER), spawner: defaultNativeFile(envdBundle, 'svc-spawner', process.env.SVC_SPAWNER), codeInterpreter: defaultNativeFile(envdBundle, 'code-interpreter.mjs', process.env.SVC_CODE_INTERPRETER_BUNDLE), mcpGateway: defaultNativeFile(envdBundle, 'mcp-gateway', process.env.SVC_MCP_GATEWAY_DIR), ptyModulesDir: defaultPtyModulesDir() });
    })().catch((err) => { bundle = undefined; throw err; });
    return bundle;
  };
  const resolv = await sandboxResolvConf();
  const launcher = new InstanceLauncher({
    logger, drivers, artifacts, firewall, addresses, names, records, runtimeBundle,
    // The envd bundle the sandboxes run is built from the same checkout.
    envdVersion: ENVD_VERSION, files: resolv ? { '/etc/resolv.conf': resolv } : {},
  });

  const volumePlugins = new VolumePluginRegistry(nc.volume_plugins);
  // Host paths plugins answer must lie inside it (docs/volume-plugins.md, "Rules"); made here so that the check can resolve it.
  // 0700, an existing one too: a volume is mounted under it as its plugin keeps it (the local
  // plugin's are 0777, for the sandbox's own user), and until 2026-11-30 any user of the host read
  // and changed a team's files through it while a sandbox held the volume. The runtimes reach it as root.
  // Only one made for svc is changed (config-dirs.ts): a setting of /tmp once took its sticky bit.
  const privateBase = await makeDirPrivate(nc.volume_plugin_base_dir);
  // A directory it may not or must not change (root-squashed NFS, a shared one): volumes still attach; the operator is told.
  if (privateBase.chmodError || privateBase.leftAlone) logger.warn({ dir: nc.volume_plugin_base_dir, err: privateBase.chmodError ?? privateBase.leftAlone }, 'volume_plugin_base_dir was not made 0700: other users of the host may reach mounted volumes through it; give it a directory of its own');
  const volumes = new VolumeAttachments({ logger, nodeId, hooksFor: (driver) => volumePlugins.node(driver), baseDir: nc.volume_plugin_base_dir });

  const report = await reconcile({ logger, drivers, records, names, firewall, addresses, launcher });
  const sc = cfg.svclet_conf;
  // Warm sandboxes run on the node's default runtime: booted gVisor sandboxes, or microvm clones
  // parked on their template's memory file, which hold no guest page while they wait
  // (docs/runtimes.md, "The warm pool of parked clones").
  const warmPool = { warmPoolSize: nc.warm_pool_size, warmPoolInitial: warmPoolStart(nc), warmPoolMax: nc.warm_pool_max, warmRuntime: drivers.default.kind };
  const sandboxes = new NodeSandboxes({
    logger, launcher, drivers, artifacts, layers, execInputs, firewall, records, capacity, releaseRatio: ratio, memoryQuotaMB,
    hosts: new HostLearner(parseEgressResolve(cfg.egress.resolve), logger),
    ...warmPool,
    warmShape: { cpuCount: sc.default_cpu_count, memoryMB: sc.default_memory_mb, diskSizeMB: sc.default_disk_size_mb },
    volumes,
  });
  late.sandboxes = sandboxes;
  const stopPoolMetrics = collectWarmPoolMetrics(sandboxes.pool, logger);
  sandboxes.adopt(report.adopted);
  const memory = new MemoryAdmission({
    gauge: new MemoryGauge(names.cgroupParent), logger, quotaMB: memoryQuotaMB,
    reserveMB: nc.host.quota.memory_reserve_mb || defaultReserveMB(capacity.memoryMB),
    maxCpuPressurePct: nc.host.quota.max_cpu_pressure,
    usage: () => {
      const u = sandboxes.usage();
      return { usedNominalMB: u.usedMemoryMB, sandboxes: u.running + u.paused + sandboxes.pool.count() };
    },
  });
  sandboxes.useMemoryAdmission(memory);
  await memory.measure();
  // Templates already on this node were put here to be used: their pools start now, as on arrival.
  for (const a of artifacts.list()) sandboxes.pool.fill(a.artifactId);

  const app = createHttpApp({ logger, https: clusterTlsOf(cfg) });
  requireNodeToken(app, nc.token, nc.listen);
  let url = '';
  const nodeInfo = (): NodeInfo => {
    const u = sandboxes.usage();
    return {
      nodeId, address: advertised(nc.addr, url), runtime: drivers.default.kind, runtimes: drivers.kinds(), pauseKinds: drivers.default.pauseKinds, capacity,
      pausedResourceReleaseRatio: ratio, sandboxes: { running: u.running, paused: u.paused }, version: NODE_AGENT_VERSION,
      ...(eg.enabled ? { egressAdminUrl: eg.admin_addr } : {}),
      warmPool: sandboxes.pool.stats(),
      features: [NODE_FEATURE_VOLUMES],
      ...(Object.keys(labels).length ? { labels } : {}),
    };
  };
  const periodic = new Periodic(logger);
  registerRoutes(app, {
    sandboxes, nodeInfo, nodeId,
    artifacts: new NodeArtifacts({ store: artifacts, drivers, pool: sandboxes.pool, users: (artifactId) => sandboxes.artifactUsers(artifactId) }),
    layers, tasks: () => periodic.stats(),
    createDefaults: { diskSizeMB: sc.default_disk_size_mb, timeoutMs: cfg.master.create_timeout_insec * 1000 },
    volumes,
  });
  // The volume content API (docs/volumes.md): the master authorized the call and names the volume in VOLUME_HEADER.
  await app.register(async (scope) => {
    registerVolumeContentRoutes(scope, {
      prefix: '/v1/volume-content',
      open: async (volumeId, req) => {
        const v = decodeVolumeHeader(req.headers[VOLUME_HEADER]);
        if (v.volumeId !== volumeId) throw new SvcError(400, `${VOLUME_HEADER} names volume ${v.volumeId}, the path ${volumeId}`);
        return volumes.open(v, randomBytes(6).toString('hex'));
      },
    });
  });
  const { host, port } = parseListen(nc.listen);
  await app.listen({ host, port });
  const addr = app.server.address();
  url = typeof addr === 'object' && addr ? `${internalScheme(cfg)}://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}` : nc.addr;

  const link = masterAddr
    ? new MasterLink({
      masterAddr, clusterToken: cfg.cluster_token, logger,
      registration: () => {
        const i = nodeInfo();
        return {
          nodeId, address: i.address, runtime: i.runtime, runtimes: i.runtimes, pauseKinds: i.pauseKinds, capacity, pausedResourceReleaseRatio: ratio, version: i.version,
          ...(i.egressAdminUrl ? { egressAdminUrl: i.egressAdminUrl } : {}),
          features: i.features,
          ...(i.labels ? { labels: i.labels } : {}),
        };
      },
      heartbeat: () => {
        const u = sandboxes.usage();
        return { sandboxes: { running: u.running, paused: u.paused }, usedMemoryMB: u.usedMemoryMB, ended: sandboxes.recentlyEnded(), memory: memory.snapshot() };
      },
    })
    : undefined;
  link?.start();
  // The metrics history (docs/observability.md): a sample of each running sandbox every 5 s, to the master.
  const reports = masterAddr ? new MetricsHistoryClient(masterAddr, { timeoutMs: 10_000, headers: clusterHeaders(cfg.cluster_token) }) : undefined;
  const sampler = new MetricsSampler({
    logger, running: () => sandboxes.runningIds(), stillRunning: (id) => sandboxes.isRunning(id), read: (id) => sandboxes.metrics(id, { waitForCpu: false }),
    // Without a master (tests, benchmarks) a round is read and let go.
    send: async (samples) => { await reports?.report(nodeId, samples); },
  });
  if (reports) sampler.start();

  periodic.every('liveness sweep', opts.livenessIntervalMs ?? 5_000, () => sandboxes.sweepDead());
  // Only instances whose runtime has no OOM killer inside are watched (memoryUsedBytes).
  const memoryWatch = drivers.all().some((d) => d.memoryUsedBytes)
    ? new MemoryWatch({
      logger,
      running: () => sandboxes.runningInstances().filter((inst) => drivers.of(inst.record).memoryUsedBytes),
      usedBytes: (inst) => drivers.of(inst.record).memoryUsedBytes!(inst.ref),
    })
    : undefined;
  memoryWatch?.start();
  periodic.every('memory measure', 2_000, () => memory.measure());
  periodic.every('console log cap', 15_000, () => sandboxes.capConsoles());
  periodic.every('allowOut host names learned again', 60_000, () => sandboxes.relearnHosts());

  logger.info({ nodeId, url, runtimes: drivers.kinds(), platforms, stateDir, tag: names.tag, adopted: report.adopted.length }, 'node agent serving');

  let closed: Promise<void> | undefined;
  return {
    url,
    nodeId,
    runtime: drivers.default.kind,
    runtimes: drivers.kinds(),
    close(closeOpts = {}) {
      closed ??= (async () => {
        stopPoolMetrics();
        await periodic.stop();
        memoryWatch?.stop();
        link?.stop();
        platform.stop();
        await sampler.stop();
        await app.close();
        await sandboxes.close(closeOpts);
        await volumePlugins.close();
        await Promise.all(drivers.all().map((d) => d.settled?.()));
        // Instances of a runtime this node no longer offers are in no count but still run: while
        // any record is left, the table (which isolates them) stays.
        if (sandboxes.count === 0 && (await records.loadAll()).records.length === 0) {
          await firewall.drop();
          if (eg.enabled) await removeEgressAddress(eg.address);
          await Promise.all(drivers.all().map((d) => d.removeParentCgroups?.()));
          await artifacts.unmountAll(new Set());
        }
      })();
      return closed;
    },
    exec: (sandboxId, argv, execOpts) => {
      const inst = sandboxes.instanceOf(sandboxId);
      return drivers.of(inst.record).exec(inst.ref, argv, execOpts);
    },
    inspect: (sandboxId) => {
      const { record: r, ref } = sandboxes.instanceOf(sandboxId);
      return { instanceId: r.instanceId, dir: ref.dir, netns: r.netns, hostVeth: r.hostVeth, address: r.address };
    },
    settled: async () => { await Promise.all(drivers.all().map((d) => d.settled?.())); },
    sweepDead: () => sandboxes.sweepDead(),
    warmCount: () => sandboxes.pool.count(),
    sampleMetrics: () => sampler.tick(),
    refreshPlatformAddresses: () => platform.refresh(),
  };
}

/** The configured address, unless it names port 0 (tests): then where the server really listens. */
function advertised(configured: string, actual: string): string {
  return !configured || /:0\/?$/.test(configured) ? actual : configured;
}
