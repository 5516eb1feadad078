import type { FastifyInstance } from 'fastify';
import { clusterTlsOf, createHttpApp, requireSharedToken, hostForClient, internalScheme, parseListen, Periodic, randomId, type Coordination, type Logger, type SvcConfig } from '@svc/common';
import { TEAM_HEADER } from '@svc/contracts/teams';
import { CLUSTER_TOKEN_HEADER, MASTER_OPEN_PATHS } from '@svc/contracts/cluster-token';
import { openDatabase, type Db } from './db/connect.ts';
import { migrate } from './db/migrator.ts';
import { migrations } from './migrations/index.ts';
import { NodeRegistry } from './nodes/registry.ts';
import { registerDrainRoutes, registerNodeRoutes } from './nodes/routes.ts';
import { NodeEgressPolicies } from './egress-policies.ts';
import { AnnouncedProxyPurger } from './proxies.ts';
import { SandboxRepo } from './sandboxes/repo.ts';
import { registerSandboxRoutes } from './sandboxes/routes.ts';
import { MASTER_INTERNAL_ROUTES } from '@svc/contracts/master-internal';
import { serve } from '@svc/contracts/route-table';
import { MasterSandboxes } from './sandboxes/service.ts';
import { startTemplates, type SnapshotDeletion, type TemplatesModule } from './templates/index.ts';
import { BuildRepo } from './builds/repo.ts';
import { registerBuildRoutes } from './builds/routes.ts';
import { ContextFiles } from './builds/context-files.ts';
import { BuildFileRepo } from './builds/build-file-repo.ts';
import { BuildService } from './builds/service.ts';
import { TeamBuilds } from './builds/team-builds.ts';
import { lateBuilderStatus } from './builds/status-port.ts';
import { SnapshotCatalog } from './snapshots/catalog.ts';
import { SnapshotRepo } from './snapshots/repo.ts';
import { SnapshotAwareResolver } from './snapshots/resolver.ts';
import { registerSnapshotRoutes } from './snapshots/routes.ts';
import { SnapshotService } from './snapshots/service.ts';
import { TemplateCenterLayerStorage } from './snapshots/layer-storage.ts';
import { PausePackageStore } from './snapshots/pause-packages.ts';
import { NodeDrains } from './sandboxes/drain.ts';
import { TemplateCenterClient } from '@svc/contracts/template-center';
import { join } from 'node:path';
import { TeamService } from './teams/service.ts';
import { registerTeamRoutes } from './teams/routes.ts';
import { guardOwnedRoutes } from './teams/ownership.ts';
import { masterOwnedRoutes } from './teams/guards.ts';
import { loadVaultKeyFile } from './vault/vault.ts';
import { resealStaleValues } from './vault/sealed-columns.ts';
import { SecretRepo } from './secrets/repo.ts';
import { SecretService } from './secrets/service.ts';
import { registerSecretRoutes } from './secrets/routes.ts';
import { WorkloadIdentityIssuer } from './identity/issuer.ts';
import { DbSigningKeyStore } from './identity/key-store.ts';
import { registerIdentityRoutes } from './identity/routes.ts';
import { registerMintRoute } from './identity/mint-route.ts';
import { VolumePluginRegistry } from '@svc/volumes';
import { VolumeService } from './volumes/service.ts';
import { attachClaimTtlMs } from './volumes/attach-claims.ts';
import { MAX_NODES_ASKED } from './sandboxes/placement.ts';
import { VolumeRepo } from './volumes/repo.ts';
import { volumeNodesOf } from './volumes/nodes.ts';
import { registerVolumeRoutes } from './volumes/routes.ts';
import { startEvents, type DeliveryTiming, type EventsModule } from './events/module.ts';
import { platformEndpointCheck } from './events/endpoint-check.ts';
import { collectTableMetrics, registerMetricsRoute } from './prometheus/scrape.ts';
import { JobStore } from './templates/store/jobs.ts';
import { metricsHistory } from './metrics-history/module.ts';
import { SAMPLE_INTERVAL_MS } from '@svc/contracts/metrics-history';

export interface MasterOptions {
  logger: Logger;
  coordination: Coordination;
  /** Replaces the template module (unit tests of other parts of the master). */
  templates?: (deps: { app: FastifyInstance; db: Db; nodes: NodeRegistry; snapshots: SnapshotDeletion }) => Promise<TemplatesModule>;
  /** Shorter webhook retry delays and polls than E2B's (tests of the retries). */
  webhookDelivery?: DeliveryTiming;
}

export interface Master {
  url: string;
  app: FastifyInstance;
  db: Db;
  sandboxes: MasterSandboxes;
  nodes: NodeRegistry;
  templates: TemplatesModule;
  /** The workload identity issuer (docs/security.md). */
  identity: WorkloadIdentityIssuer;
  /** Lifecycle events and webhooks (docs/observability.md). */
  events: EventsModule;
  close(): Promise<void>;
}

const TERMINATED_RETENTION_MS = 24 * 3600_000;

export async function startMaster(cfg: SvcConfig, opts: MasterOptions): Promise<Master> {
  const { logger, coordination } = opts;
  const db = await openDatabase(cfg.master.database, logger);
  const result = await migrate(db.kysely, db.driver, migrations);
  if (result.applied.length) logger.info({ applied: result.applied }, 'database migrations applied');
  if (result.unknown.length) logger.warn({ unknown: result.unknown }, 'database has migrations this build does not know (a newer master ran here?)');

  // A team's call (the gateway passes the answer on to the team) hears no address of a node or
  // component that did not answer; the operator's and the platform's own calls hear the details.
  const app = createHttpApp({ logger, bodyLimit: 4 * 1024 * 1024, https: clusterTlsOf(cfg), publicFacing: (req) => req.headers[TEAM_HEADER] !== undefined });
  // First of all: every route but the probes is the operator's or the platform's own, so anyone
  // on the network who reached this port without cluster_token was the operator (docs/cluster.md).
  requireSharedToken(app, {
    token: cfg.cluster_token, header: CLUSTER_TOKEN_HEADER, setting: 'cluster_token', openPaths: MASTER_OPEN_PATHS, listen: cfg.master.listen,
    exposure: 'is the operator: every team, key and sandbox',
  });
  const teams = new TeamService(db.kysely, logger);
  await teams.ensureDefault();
  // Before any route: a team's call that names another team's resource is a 404 (docs/security.md).
  guardOwnedRoutes(app, masterOwnedRoutes({
    sandbox: async (id) => { const r = await repo.get(id); return r && { teamId: r.team_id }; },
    snapshot: async (ref) => { const s = await snapshotRepo.resolve(ref); return s && { teamId: s.team_id }; },
    // The template module starts below; requests come only once the master listens.
    template: async (ref) => templates.ownerOf?.(ref),
    job: async (jobId) => templates.ownerOfJob?.(jobId),
  }));
  const vault = loadVaultKeyFile(cfg.master.vault_key_file || join(cfg.data_dir, 'vault', 'key.json'), { create: !cfg.master.vault_key_file });
  // Before anything opens a sealed value: what an older key sealed moves to the primary, so that
  // key can leave the file (docs/security.md, "The vault key").
  await resealStaleValues(db.kysely, vault, logger);
  const secrets = new SecretService(new SecretRepo(db.kysely), vault);
  const identity = new WorkloadIdentityIssuer({
    store: new DbSigningKeyStore(db.kysely, vault, logger), issuerUrl: (cfg.master.identity_issuer_url || `http://${hostForClient(cfg.api.listen)}`).replace(/\/+$/, ''), trustDomain: cfg.master.identity_trust_domain,
  });
  await identity.start();
  const nodes = new NodeRegistry(db.kysely, cfg.master.placement, cfg.node_agent.token);
  const periodic = new Periodic(logger);
  const repo = new SandboxRepo(db.kysely, db.driver);
  const snapshotRepo = new SnapshotRepo(db.kysely);
  const templateCenter = new TemplateCenterClient(cfg.template_center.addr, cfg.template_center.callback_token);
  const layerStorage = new TemplateCenterLayerStorage(templateCenter, cfg.master.addr);
  const snapshotCatalog = new SnapshotCatalog(snapshotRepo, nodes, layerStorage, logger);
  const pausePackages = new PausePackageStore(snapshotRepo, nodes, layerStorage, snapshotCatalog, logger);
  // Builds start after the sandbox service they need; the template module's status route asks them late.
  let builds: BuildService | undefined;
  const builderStatus = lateBuilderStatus(() => builds);
  const teamBuilds = new TeamBuilds({ db: db.kysely, quotas: teams, coordination });
  const templates = opts.templates
    ? await opts.templates({ app, db, nodes, snapshots: snapshotCatalog })
    : await startTemplates(cfg, { app, db, nodes, coordination, logger, periodic, snapshots: snapshotCatalog, builtLayers: snapshotCatalog, builderStatus, teamBuilds, vault });
  const volumePlugins = new VolumePluginRegistry(cfg.master.volume_plugins);
  const volumes = new VolumeService({ repo: new VolumeRepo(db.kysely), plugins: volumePlugins, nodes: volumeNodesOf(nodes, db.kysely, logger), logger, coordination, quotas: teams,
    attachClaimTtlMs: attachClaimTtlMs(cfg.master.create_timeout_insec, MAX_NODES_ASKED),
  });
  const sandboxResolver = new SnapshotAwareResolver(templates.resolver, snapshotRepo, layerStorage);
  const events = startEvents(cfg, { db: db.kysely, vault, logger, nodes, timing: opts.webhookDelivery });
  const metrics = metricsHistory({ db: db.kysely, driver: db.driver, logger, counts: { running: () => repo.runningByTeam(), startsBetween: (from, to) => events.createsByTeam(from, to) } });
  const sandboxes = new MasterSandboxes({
    cfg, repo, nodes, templates: sandboxResolver, coordination, logger, events: events.recorder, metricsHistory: metrics.history,
    proxies: new AnnouncedProxyPurger(coordination, cfg.svcproxy.admin_token, logger),
    egress: new NodeEgressPolicies(nodes, cfg.egress.admin_token, logger),
    endpoints: platformEndpointCheck(cfg, nodes),
    quotas: teams, secrets, volumes, pausePackages,
  });
  const snapshots = new SnapshotService({ repo: snapshotRepo, sandboxes, nodes, templates: templates.resolver, storage: layerStorage, catalog: snapshotCatalog, logger, quotas: teams });
  if (templates.builder) {
    const files = new ContextFiles({ templateCenter, masterAddr: cfg.master.addr, signingKey: cfg.master.upload_signing_key, logger, records: new BuildFileRepo(db.kysely), teamMaxBytes: cfg.master.build_files_team_max_mb * 1_048_576 });
    await files.registerRoutes(app);
    const keepFilesMs = cfg.master.build_files_keep_days * 86_400_000;
    periodic.every('unused build files sweep', 3_600_000, async () => { await files.sweep(keepFilesMs); });
    builds = new BuildService({
      repo: new BuildRepo(db.kysely), templates: templates.builder, resolver: sandboxResolver, sandboxes, nodes, logger, files,
      maxConcurrent: cfg.master.max_concurrent_builds, timeoutMs: cfg.master.build_timeout_sec * 1000, quotas: teams, teamBuilds,
      snapshots: { capture: (id, o) => snapshots.capture(id, o), byCacheKey: (key) => snapshotRepo.byCacheKey(key), layerOf: (id) => snapshotCatalog.layerOf(id) },
    });
    registerBuildRoutes(app, builds);
    const b = builds;
    periodic.every('abandoned build sweep', 300_000, async () => { await b.failAbandoned(); });
    periodic.every('template build retention prune', 3_600_000, async () => { await b.pruneFinished(); }, { firstAfterMs: 300_000 });
  }

  serve(app, MASTER_INTERNAL_ROUTES.health, async () => ({ ok: true, damagedSandboxRows: sandboxes.damaged.list(), tasks: periodic.stats() }));
  registerMetricsRoute(app);
  const stopMetrics = collectTableMetrics({ sandboxes: repo, jobs: new JobStore(db.kysely), nodes, logger });
  registerSandboxRoutes(app, sandboxes, cfg.egress.admin_token);
  registerSnapshotRoutes(app, snapshots, snapshotCatalog);
  registerTeamRoutes(app, teams, { runningByTeam: () => repo.runningByTeam(), killAll: (teamId) => sandboxes.killTeam(teamId) });
  registerSecretRoutes(app, secrets, cfg.egress.admin_token);
  events.registerRoutes(app);
  metrics.registerRoutes(app, async (teamId) => teams.getTeam(undefined, teamId).then(() => true, (err: { status?: number }) => {
    if (err.status === 404) return false;
    throw err;
  }));
  await registerVolumeRoutes(app, volumes);
  registerIdentityRoutes(app, identity);
  registerMintRoute(app, identity, {
    async of(sandboxId) {
      const r = await repo.get(sandboxId);
      if (!r || r.state === 'terminated') return undefined;
      return { teamId: r.team_id, tokens: r.iam ? JSON.parse(r.iam) as Record<string, { audience: string }> : {} };
    },
  }, cfg.egress.admin_token);
  periodic.every('workload identity key rotation', 60_000, () => identity.rotateIfDue());
  layerStorage.registerDownloadRoute(app);
  registerNodeRoutes(app, nodes, (nodeId) => {
    sandboxes.reconcileNode(nodeId).catch((err) => logger.warn({ nodeId, err: (err as Error).message }, 'node reconcile failed'));
    templates.onNodeRegistered(nodeId);
  }, logger, (nodeId, ended) => {
    sandboxes.recordEnded(nodeId, ended).catch((err) => logger.warn({ nodeId, err: (err as Error).message }, 'recording sandboxes that ended on a node failed'));
  });

  periodic.every('lost node sweep', 5_000, () => sandboxes.sweepLostNodes());
  const drains = new NodeDrains({ nodes, repo, sandboxes, coordination, holder: `master-${process.pid}-${randomId(6)}`, logger, concurrency: cfg.master.drain_concurrency });
  registerDrainRoutes(app, drains);
  periodic.every('stale pause package sweep', 600_000, async () => {
    await pausePackages.sweepStale(async (sandboxId) => (await repo.get(sandboxId))?.pause_snapshot_id ?? null);
  }, { firstAfterMs: 60_000 });
  periodic.every('stuck sandbox reconcile', 30_000, async () => {
    const rows = await repo.stuck(Date.now() - 60_000);
    for (const nodeId of new Set(rows.map((r) => r.node_id))) {
      await sandboxes.reconcileNode(nodeId).catch((err) => logger.warn({ nodeId, err: (err as Error).message }, 'reconcile of a node with stuck sandboxes failed'));
    }
  });
  // Well past a create's or a move's longest run: what is recorded nowhere by then never will be.
  const orphanGraceMs = 2 * cfg.master.create_timeout_insec * 1000 + 60_000;
  // Every minute, so an orphan goes within a minute or two of its grace: one list per live node.
  periodic.every('orphan sandbox sweep', 60_000, async () => {
    for (const nodeId of await nodes.liveNodeIds()) {
      await sandboxes.removeOrphans(nodeId, orphanGraceMs).catch((err) => logger.warn({ nodeId, err: (err as Error).message }, 'orphan sweep of a node failed'));
    }
  }, { firstAfterMs: 120_000 });
  periodic.every('orphan snapshot layer sweep', 600_000, async () => { await snapshotCatalog.sweepOrphanLayers(); });
  periodic.every('pending snapshot sweep', 600_000, async () => { await snapshotCatalog.finishPending(); }, { firstAfterMs: 30_000 });
  // Counts move by the nodes' flips; this mends what lost answers and sandboxes that died on a node left.
  periodic.every('volume refcount recount', 60_000, () => volumes.recount(), { firstAfterMs: 15_000 });
  periodic.every('terminated sandbox purge', 600_000, () => repo.purgeTerminated(Date.now() - TERMINATED_RETENTION_MS));
  periodic.every('event and metrics retention prune', 600_000, async () => {
    await events.prune();
    await metrics.history.prune(Date.now() - cfg.events.retention_days * 24 * 3600_000);
  }, { firstAfterMs: 60_000 });
  periodic.every('team metrics sampler', SAMPLE_INTERVAL_MS, () => metrics.history.sampleTeams());

  const { host, port } = parseListen(cfg.master.listen);
  await app.listen({ host, port });
  const url = `${internalScheme(cfg)}://${host}:${(app.server.address() as { port: number }).port}`;
  logger.info({ url }, 'master listening');
  return {
    url, app, db, sandboxes, nodes, templates, identity, events,
    async close() {
      stopMetrics();
      await periodic.stop();
      await events.stop();
      await drains.stop();
      await builds?.settled();
      await templates.close();
      await volumePlugins.close();
      await app.close();
      await db.close();
    },
  };
}
