import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { clusterTlsOf, ConfigError, createHttpApp, internalScheme, isLoopbackHost, parseListen, scrapeToken, sendError, sendMetrics, servedRoutes, SvcError, type Coordination, type ServedRoute, type Logger, type SvcConfig } from '@svc/common';
import { registerArtifactRoutes } from './artifact-routes.ts';
import { BlobCache } from './blobs/blob-cache.ts';
import { blobCacheOf } from './blobs/blob-cache-env.ts';
import { CallbackSender } from './build/callback-sender.ts';
import { JobRunner } from './build/job-runner.ts';
import { registerLayerRoutes } from './layer-routes.ts';
import type { ProgressTiming } from './build/progress-reporter.ts';
import { parseBuildRequest } from './build-request.ts';
import { CALLBACK_TOKEN_HEADER, TEMPLATE_CENTER_ROUTES as R } from '@svc/contracts/template-center';
import { verifyCallbackToken } from '@svc/contracts/template-callback';
import { serve } from '@svc/contracts/route-table';
import type { ArtifactStore } from './store/artifact-store.ts';
import { LocalArtifactStore } from './store/local-store.ts';
import { privateDir } from './store/private-dir.ts';
import { s3OptionsOf } from './store/s3-env.ts';
import { S3ArtifactStore, type S3StoreOptions } from './store/s3-store.ts';

export interface TemplateCenterOptions {
  logger: Logger;
  coordination: Coordination;
  /** Where status callbacks go (default cfg.master.addr). */
  masterAddr?: string;
  /** PEM of the egress root CA, baked in when a build asks withSvcCa (default `template_center.ca_cert_file`). */
  caCertPath?: string;
  /** S3-compatible store; default from the config (`template_center.s3`), or else the local artifact_dir. */
  s3?: S3StoreOptions;
  /** A store to use as is (tests). */
  store?: ArtifactStore;
  /** Staging trees (default <artifact_dir>/.work). */
  workDir?: string;
  /** Downloaded layer blobs, shared by builds (default `template_center.blob_cache.dir` or <artifact_dir>/.blobs). */
  blobCacheDir?: string;
  /** Least recently used blobs go above this (default `template_center.blob_cache.max_mb`, 5 GiB). */
  blobCacheMaxBytes?: number;
  /** Default `template_center.max_concurrent_builds`. */
  maxConcurrentBuilds?: number;
  /** How long a status callback is retried while the master is unreachable. */
  callbackRetryMs?: number;
  progressTiming?: Partial<ProgressTiming>;
  /** Where the images of `debian-rootfs` sources are cached (default /var/cache/svc, machine-wide). */
  debianImageDir?: string;
  /** A build running longer fails and frees its slot (default `master.build_timeout_sec`). */
  buildTimeoutMs?: number;
}

export interface RunningTemplateCenter {
  url: string;
  store: ArtifactStore;
  /** Jobs accepted and not finished. */
  activeJobs(): number;
  /** What the server registered, held against TEMPLATE_CENTER_ROUTES by routes.test.ts. */
  routes(): ServedRoute[];
  close(): Promise<void>;
}

/**
 * The template center: builds ext4 root filesystems from images and keeps them, and snapshot layers
 * (docs/templates.md, "Template center behaviour", "Snapshot layers"). Its routes live on loopback by
 * default and all but /health require the template callback token, /metrics included.
 */
export async function startTemplateCenter(cfg: SvcConfig, opts: TemplateCenterOptions): Promise<RunningTemplateCenter> {
  const tc = cfg.template_center;
  const logger = opts.logger;
  // As every other component's shared token (common shared-token.ts): beyond loopback, no token
  // served builds and artifacts to anyone on the network, with a warning in a log nobody read.
  if (!tc.callback_token && tc.insecure_no_token && !isLoopbackHost(parseListen(tc.listen).host)) {
    throw new ConfigError('template_center.insecure_no_token', `is set with no template_center.callback_token, and ${tc.listen} is not a loopback address: anyone who reaches this port could build templates and read every artifact. Set the token, or listen on loopback`);
  }
  const artifactDir = tc.artifact_dir || join(cfg.data_dir, 'artifacts');
  const workDir = opts.workDir ?? join(artifactDir, '.work');
  const s3 = opts.s3 ?? s3OptionsOf(tc.s3, join(workDir, 'images'));
  const store = opts.store ?? (s3 ? new S3ArtifactStore(s3) : new LocalArtifactStore(artifactDir));
  // Before the store makes its scratch directory in it (an S3 store's is <workDir>/images).
  await privateDir(workDir, (message) => logger.warn({ workDir }, `template center work directory: ${message}`));
  await store.init();
  const blobEnv = blobCacheOf(tc.blob_cache, join(artifactDir, '.blobs'));
  const blobs = new BlobCache({ dir: opts.blobCacheDir ?? blobEnv.dir, maxBytes: opts.blobCacheMaxBytes ?? blobEnv.maxBytes, logger });
  await blobs.init();

  const masterAddr = opts.masterAddr ?? cfg.master.addr;
  const callbacks = new CallbackSender({ masterAddr, token: tc.callback_token, clusterToken: cfg.cluster_token, logger, retryForMs: opts.callbackRetryMs });
  const runner = new JobRunner({
    store, workDir, blobs, caCertPath: opts.caCertPath ?? (cfg.template_center.ca_cert_file || undefined),
    registryMirrors: commaList(tc.registry_mirrors), hostRegistries: commaList(tc.host_registries), maxImageBytes: tc.max_image_mb * 1_048_576, coordination: opts.coordination, callbacks, logger,
    maxDiskSizeMB: cfg.svclet_conf.max_disk_size_mb, buildTimeoutMs: opts.buildTimeoutMs ?? cfg.master.build_timeout_sec * 1000,
    maxConcurrent: opts.maxConcurrentBuilds ?? tc.max_concurrent_builds, instanceId: randomBytes(6).toString('hex'), progressTiming: opts.progressTiming,
    debianImageDir: opts.debianImageDir,
  });

  const app = createHttpApp({ logger, https: clusterTlsOf(cfg) });
  serve(app, R.health, async (_req, reply) => {
    const ok = await store.ready();
    return reply.status(ok ? 200 : 503).send({ ok, store: store.kind });
  });
  // The callback token, taken from Authorization: Bearer too, which is all an older Prometheus sends.
  serve(app, R.metrics, async (req, reply) => {
    const check = verifyCallbackToken(scrapeToken(req.headers, CALLBACK_TOKEN_HEADER), tc.callback_token, tc.insecure_no_token);
    if (!check.ok) throw new SvcError(check.status, check.message);
    return sendMetrics(reply);
  });
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (req, reply) => {
      const check = verifyCallbackToken(req.headers[CALLBACK_TOKEN_HEADER], tc.callback_token, tc.insecure_no_token);
      if (!check.ok) return sendError(reply, new SvcError(check.status, check.message));
    });
    serve(scope, R.build, async (req, reply) => {
      const build = parseBuildRequest(req.body);
      runner.submit(build);
      return reply.status(202).send({ jobId: build.jobId });
    });
    serve(scope, R.cancelBuild, async (req) => {
      const cancelled = runner.cancel(req.params.jobId);
      logger.info({ jobId: req.params.jobId, cancelled }, cancelled ? 'build job cancelled' : 'cancel of a build job not here (finished or unknown)');
      return { cancelled };
    });
    registerArtifactRoutes(scope, store);
    await registerLayerRoutes(scope, store);
  });

  const { host, port } = parseListen(tc.listen);
  await app.listen({ host, port });
  const address = app.server.address();
  const boundPort = typeof address === 'object' && address ? address.port : port;
  const url = `${internalScheme(cfg)}://${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
  if (!isLoopbackHost(host)) logger.warn({ listen: tc.listen }, 'template center listens beyond loopback; keep it on a cluster-internal network');
  if (!tc.callback_token) {
    logger.warn(tc.insecure_no_token ? 'template callback token unset: running without authentication (insecure_no_token)' : 'template callback token unset: every build request will be refused with 503');
  }
  logger.info({ url, store: store.kind, masterAddr }, 'template center listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    store,
    activeJobs: () => runner.activeJobs,
    routes: () => servedRoutes(app),
    close: () => closing ??= (async () => {
      await app.close();
      await runner.close();
      callbacks.close();
    })(),
  };
}


function commaList(text: string): string[] {
  return text.split(',').map((m) => m.trim()).filter(Boolean);
}
