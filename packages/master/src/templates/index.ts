import type { FastifyInstance } from 'fastify';
import { randomId, waitAtMost, withLock, type Coordination, type Logger, type Periodic, type SvcConfig } from '@svc/common';
import { TemplateCenterClient } from '@svc/contracts/template-center';
import type { Db } from '../db/connect.ts';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { TemplateResolver } from '../sandboxes/ports.ts';
import { BuildJobs } from './build-jobs.ts';
import { ArtifactCleanup } from './cleanup.ts';
import { Distributor } from './distribution.ts';
import { registerCallbackRoute } from './routes/callback.ts';
import { registerDownloadRoute } from './routes/download.ts';
import { registerE2bTemplateRoutes, type SnapshotDeletion } from './routes/e2b.ts';
import type { BuilderStatus } from './builder-port.ts';
import { withTemplateErrors } from './routes/error-scope.ts';
import { registerSvcTemplateRoutes } from './routes/svc.ts';
import { TemplateService, type TeamBuildAdmission } from './service.ts';
import type { BuiltLayers } from './template-resolver.ts';
import type { Owner } from '../teams/ownership.ts';
import { ArtifactStore, DefinitionStore } from './store/artifacts.ts';
import { JobStore } from './store/jobs.ts';
import { TemplateStore } from './store/templates.ts';
import type { JobAccepted, JobInfo, TemplateCreate } from '@svc/contracts/template-routes';
import type { BuilderTemplates } from '../builds/ports.ts';
import type { RecipeSealer } from './recipe.ts';

export { deleteSnapshotNamed, type SnapshotDeletion } from './routes/e2b.ts';
export { relayFromTemplateCenter } from './relay.ts';

export interface TemplatesDeps {
  app: FastifyInstance;
  /** The master's vault: registry credentials in a template's recipe are sealed with it. */
  vault?: RecipeSealer;
  db: Db;
  nodes: NodeRegistry;
  coordination: Coordination;
  logger: Logger;
  /** How long unreferenced artifacts and superseded definitions are kept (default 1 hour). */
  artifactGraceMs?: number;
  /** Where the background reconciler and GC sweep run; absent: none (tests drive reconcileOnce / sweepOnce). */
  periodic?: Periodic;
  /** Snapshots, which E2B deletes through DELETE /templates/{id}. */
  snapshots?: SnapshotDeletion;
  /** The layers of templates the builder made. */
  builtLayers?: BuiltLayers;
  /** Status of a builder build (E2B's status route serves both kinds of build). */
  builderStatus?: BuilderStatus;
  /** A team's builds at once (maxConcurrentBuilds), its image builds among them; absent: no limit. */
  teamBuilds?: TeamBuildAdmission;
}

/** What the rest of the master uses (other tests may replace the module with a fake of this). */
export interface TemplatesModule {
  resolver: TemplateResolver;
  /** Copies the artifacts of ready templates to a node that (re-)registered, in the background. */
  onNodeRegistered(nodeId: string): void;
  close(): Promise<void>;
  /** In-process create through the same pipeline as POST /svc/template (`svc up` may build `base` this way). */
  createTemplate?(input: TemplateCreate): Promise<JobAccepted>;
  /** The template rows E2B's builder makes (absent: no builder routes). */
  builder?: BuilderTemplates;
  /** Whose the template `ref` names is (docs/security.md); absent: every template is the operator's. */
  ownerOf?(ref: string): Promise<Owner | undefined>;
  /** Whose the template a build job (of an image template) builds is. */
  ownerOfJob?(jobId: string): Promise<Owner | undefined>;
}

/** The real module, with the handles its tests and an embedding process use. */
export interface TemplatesRuntime extends TemplatesModule {
  service: TemplateService;
  createTemplate(input: TemplateCreate): Promise<JobAccepted>;
  /** Resolves when the job is BUILT or FAILED (rejects after timeoutMs). */
  waitForJob(jobId: string, timeoutMs: number): Promise<JobInfo>;
  reconcileOnce(): Promise<string[]>;
  sweepOnce(): Promise<{ deleted: string[] }>;
  /** Waits for background work (distributions, node syncs). */
  settled(): Promise<void>;
}

const DEFAULT_GRACE_MS = 3600_000;
const CLOSE_WAIT_MS = 5_000;

export async function startTemplates(cfg: SvcConfig, deps: TemplatesDeps): Promise<TemplatesRuntime> {
  const { app, nodes, coordination, logger: parent } = deps;
  const db = deps.db.kysely;
  const logger = parent.child({ module: 'templates' });
  const tc = cfg.template_center;
  const templateCenter = new TemplateCenterClient(tc.addr, tc.callback_token);
  const graceMs = deps.artifactGraceMs ?? DEFAULT_GRACE_MS;

  const templates = new TemplateStore(db);
  const jobs = new JobStore(db);
  const artifacts = new ArtifactStore(db);
  const definitions = new DefinitionStore(db);
  const distributor = new Distributor({ nodes, artifacts, templates, masterAddr: cfg.master.addr, logger });
  const builds = new BuildJobs({
    templates, jobs, artifacts, definitions, distributor, nodes, templateCenter, coordination, logger, vault: deps.vault,
    staleAfterMs: tc.reconcile.stale_after_sec * 1000,
  });
  const cleanup = new ArtifactCleanup({ db, artifacts, definitions, nodes, templateCenter, logger, graceMs });
  const service = new TemplateService({ cfg, db, templates, jobs, artifacts, definitions, builds, cleanup, templateCenter, coordination, logger, builtLayers: deps.builtLayers, snapshots: deps.snapshots, builder: deps.builderStatus, teamBuilds: deps.teamBuilds, vault: deps.vault });

  withTemplateErrors(app, (scope) => {
    registerSvcTemplateRoutes(scope, service);
    registerE2bTemplateRoutes(scope, service, deps.snapshots, deps.builderStatus);
    registerDownloadRoute(scope, artifacts, templateCenter);
  });
  registerCallbackRoute(app, tc, builds);

  // Several masters may run the periodic work; a lock keeps one pass at a time.
  const holder = `master-${process.pid}-${randomId(6)}`;
  const lockTtlMs = Math.max(60_000, tc.reconcile.interval_sec * 1000);
  const reconcileOnce = () => builds.reconcile();
  const sweepOnce = () => cleanup.sweep();
  if (deps.periodic) {
    const every = tc.reconcile.interval_sec * 1000;
    deps.periodic.every('template reconcile', every, () => withLock(coordination, 'svc:templates:reconcile', holder, lockTtlMs, reconcileOnce), { firstAfterMs: 10_000 });
    deps.periodic.every('artifact GC sweep', every, () => withLock(coordination, 'svc:templates:gc', holder, lockTtlMs, sweepOnce), { firstAfterMs: 10_000 });
  }

  const nodeSyncs = new Map<string, Promise<void>>();
  const onNodeRegistered = (nodeId: string) => {
    const previous = nodeSyncs.get(nodeId) ?? Promise.resolve();
    const next = previous.then(() => distributor.syncNode(nodeId))
      .catch((err) => logger.warn({ nodeId, err: (err as Error).message }, 'artifact sync with a registered node failed'))
      .finally(() => { if (nodeSyncs.get(nodeId) === next) nodeSyncs.delete(nodeId); });
    nodeSyncs.set(nodeId, next);
  };

  const settled = async () => {
    await builds.settled();
    while (nodeSyncs.size) await Promise.allSettled([...nodeSyncs.values()]);
  };

  return {
    resolver: service.resolver,
    ownerOf: (ref) => service.ownerOfRef(ref),
    ownerOfJob: (jobId) => service.ownerOfJob(jobId),
    onNodeRegistered,
    service,
    builder: service,
    createTemplate: (input) => service.create(input),
    waitForJob: async (jobId, timeoutMs) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const info = await service.job(jobId);
        if (info.status === 'BUILT' || info.status === 'FAILED') return info;
        if (Date.now() > deadline) throw new Error(`template build job ${jobId} did not finish within ${timeoutMs} ms (status ${info.status})`);
        await new Promise((r) => setTimeout(r, 250));
      }
    },
    reconcileOnce,
    sweepOnce,
    settled,
    async close() {
      // A distribution may wait minutes on a node; an abandoned one is failed by the reconciler later.
      await waitAtMost(settled(), CLOSE_WAIT_MS);
    },
  };
}
