/**
 * The template center's wire contract (port 8090, loopback by default).
 *   GET  /health                                  → { ok, store: 'local'|'s3' } (ready when the store is attached)
 *   GET  /metrics                                 → the process's Prometheus metrics (text; the callback token, as below)
 *   POST /tc/api/v1/build                         → 202 { jobId }            (body BuildRequest)
 *   POST /tc/api/v1/build/:jobId/cancel           → 200 { cancelled: boolean } (true: the job was queued or running here and is
 *        now aborted, removing what it built, freeing its slot and reporting FAILED; false: no such job here)
 *   POST /tc/api/v1/artifact/delete               → 200 { deleted: boolean } (body { artifactId })
 *   GET|HEAD /tc/api/v1/artifact/:artifactId      → the ext4 image (local store) or 302 to a presigned URL (s3)
 *   GET  /tc/api/v1/artifact/:artifactId/info     → 200 ArtifactStored (404 when the store lacks it)
 *   POST /tc/api/v1/artifact/migrate              → 200 ArtifactStored       (body { artifactId, localPath })
 *   PUT  /tc/api/v1/layer/:layerId                → 200 ArtifactStored       (body: a snapshot layer's tar or a build's context files, streamed;
 *        headers content-length and, for a layer, x-svc-layer-sha256; 400 when they do not match what arrived, nothing kept;
 *        409 when the id is stored with another sha256; 507 when the store lacks the room; the same
 *        layer again is 200 and stores nothing new). The stored layer downloads and deletes as an
 *        artifact does (GET|HEAD /tc/api/v1/artifact/:layerId, POST /tc/api/v1/artifact/delete).
 * /metrics and every /tc/api/v1 route require X-Svc-Template-Callback-Token (compared in constant time with
 * SVC_TEMPLATE_CALLBACK_TOKEN): mismatch 401, token unset on this side 503, unless
 * SVC_TEMPLATE_CALLBACK_INSECURE_NO_TOKEN=true.
 *
 * Callback to the master: POST {SVC_MASTER_ADDR}/internal/template/jobs/:jobId/status (body JobStatusReport),
 * same header and rules. Live pull progress goes to the coordination store under progressKey(jobId).
 */
import type { Readable } from 'node:stream';
import { JsonClient } from '@svc/common';
import type { ImageInfo, JobPhase, JobStatus } from './template-routes.ts';

export const CALLBACK_TOKEN_HEADER = 'x-svc-template-callback-token';
/** The sha256 a layer upload must have (PUT /tc/api/v1/layer/:layerId), as a node's archive says it. */
export { LAYER_SHA256_HEADER } from './node-agent.ts';
import { LAYER_SHA256_HEADER } from './node-agent.ts';
import { answers, call, pathTo, type RouteTable } from './route-table.ts';
import { METRICS_ROUTE } from './metrics-route.ts';

export type { JobPhase, JobStatus };

export type BuildSource =
  /** An image in a registry, pulled through the OCI distribution API. */
  | {
      kind: 'registry';
      ref: string;
      auth?: { username: string; password: string };
      platform?: { os: string; architecture: string; variant?: string };
      /** Plain HTTP registry (for loopback registries). */
      insecure?: boolean;
    }
  /** An OCI image layout directory; `ref` picks a tag from its index when there are several. */
  | { kind: 'oci-layout'; path: string; ref?: string; platform?: { os: string; architecture: string; variant?: string } }
  /** A `docker save` tarball. */
  | { kind: 'docker-archive'; path: string }
  /** A tarball of a root filesystem. */
  | { kind: 'rootfs-tar'; path: string }
  /**
   * A root filesystem the template center makes from Debian's packages (mmdebstrap, cached
   * machine-wide): how `svc up` makes `base` and `code-interpreter-v1`, so that the template
   * exists, and shows its progress, while its packages install (docs/templates.md).
   */
  | { kind: 'debian-rootfs'; flavor: DebianRootfsFlavor; recipe?: string };

/** The root filesystems the template center makes from Debian's packages. */
export const DEBIAN_ROOTFS_FLAVORS = ['base', 'code-interpreter'] as const;
export type DebianRootfsFlavor = (typeof DEBIAN_ROOTFS_FLAVORS)[number];

export interface BuildRequest {
  jobId: string;
  templateId: string;
  /** Id the built artifact must get. */
  artifactId: string;
  /** Identity of the build spec; concurrent builds of one spec are coordinated on it. */
  specHash: string;
  source: BuildSource;
  /** Bake the egress root CA into the root filesystem (`with_cube_ca`, docs/templates.md). */
  withSvcCa: boolean;
  /** Size of the ext4 image; 0 = fit the content plus headroom. */
  diskSizeMB: number;
  /**
   * The fair-share key, the owning team's id (at most 128 characters): builds waiting for one of
   * the template center's slots take turns between keys, arrival order within one. Absent: one
   * queue shared with every other build without a key.
   */
  queue?: string;
}

/** What the build found in the image (template-route-schemas.ts ImageInfo). */
export type { ImageInfo };

export interface ArtifactStored {
  artifactId: string;
  sha256: string;
  sizeBytes: number;
  storage: 'local' | 's3';
  /** Path (local) or object key (s3). */
  location: string;
  /** Presigned URL for s3 stores, valid 37 days; never refreshed. */
  downloadUrl?: string;
  urlExpiresAt?: string;
}

export interface LayerProgress {
  digest: string;
  totalBytes: number;
  doneBytes: number;
  /** Found in the template center's blob cache (verified, not downloaded again). */
  cached?: boolean;
}

export interface JobProgress {
  jobId: string;
  phase: JobPhase;
  layers: LayerProgress[];
  message?: string;
  updatedAt: string;
}

export interface JobStatusReport {
  status: JobStatus;
  phase?: JobPhase;
  /** Set with FAILED: a reason a user can act on. */
  error?: string;
  /** Set with BUILT. */
  artifact?: ArtifactStored;
  imageInfo?: ImageInfo;
}

export const progressKey = (jobId: string) => `tc:job:${jobId}:progress`;

/** An artifact's or a layer's id: what the store names its files after (1-128 of [A-Za-z0-9._-], not starting with a dot or dash). */
const ArtifactIdSchema = { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' } as const;

/** POST /tc/api/v1/artifact/delete; other fields are let through, unread. */
const DeleteArtifactBody = { type: 'object', required: ['artifactId'], properties: { artifactId: ArtifactIdSchema } } as const;

/** POST /tc/api/v1/artifact/migrate; other fields are let through, unread. */
const MigrateBody = {
  type: 'object',
  required: ['artifactId', 'localPath'],
  properties: { artifactId: ArtifactIdSchema, localPath: { type: 'string', pattern: '^/', description: 'An absolute path on the template center host' } },
} as const;

/**
 * The template center's routes (route-table.ts): its server registers them and
 * TemplateCenterClient calls them. The artifact download also answers HEAD. The delete and
 * migrate bodies are checked against their schemas before the handler runs; a build's body is
 * checked by the template center itself (template-center/src/build-request.ts).
 */
export const TEMPLATE_CENTER_ROUTES = {
  health: { method: 'GET', path: '/health', answer: answers<{ ok: boolean; store: string }>() },
  /** The process's Prometheus metrics; the callback token as the /tc/api/v1 routes (docs/observability.md). */
  metrics: METRICS_ROUTE,
  build: { method: 'POST', path: '/tc/api/v1/build', answer: answers<{ jobId: string }>() },
  /** Stops a job queued or running here (the master, when the template it builds is deleted). */
  cancelBuild: { method: 'POST', path: '/tc/api/v1/build/:jobId/cancel', answer: answers<{ cancelled: boolean }>() },
  deleteArtifact: { method: 'POST', path: '/tc/api/v1/artifact/delete', body: DeleteArtifactBody, answer: answers<{ deleted: boolean }>() },
  migrate: { method: 'POST', path: '/tc/api/v1/artifact/migrate', body: MigrateBody, answer: answers<ArtifactStored>() },
  downloadArtifact: { method: 'GET', path: '/tc/api/v1/artifact/:artifactId' },
  artifactInfo: { method: 'GET', path: '/tc/api/v1/artifact/:artifactId/info', answer: answers<ArtifactStored>() },
  putLayer: { method: 'PUT', path: '/tc/api/v1/layer/:layerId', answer: answers<ArtifactStored>() },
} as const satisfies RouteTable;

const R = TEMPLATE_CENTER_ROUTES;

export class TemplateCenterClient {
  private readonly http: JsonClient;
  constructor(baseUrl: string, token: string) {
    this.http = new JsonClient(baseUrl, { timeoutMs: 30_000, headers: token ? { [CALLBACK_TOKEN_HEADER]: token } : {} });
  }
  get baseUrl() { return this.http.baseUrl; }
  health() { return call(this.http, R.health, {}, { timeoutMs: 3_000 }); }
  build(req: BuildRequest) { return call(this.http, R.build, {}, { body: req }); }
  /** Aborts the job where it stands; `cancelled` says whether this template center had it. */
  cancelBuild(jobId: string) { return call(this.http, R.cancelBuild, { jobId }); }
  deleteArtifact(artifactId: string) { return call(this.http, R.deleteArtifact, {}, { body: { artifactId } }); }
  migrate(artifactId: string, localPath: string) {
    return call(this.http, R.migrate, {}, { body: { artifactId, localPath }, timeoutMs: 600_000 });
  }
  /**
   * Stores a snapshot layer (a tar) or a build's context files under its id in the artifact
   * store, streamed from `body`; without a sha256 the store keeps the one the bytes have.
   */
  putLayer(layerId: string, meta: { sha256?: string; sizeBytes: number }, body: Readable) {
    return this.http.streamJson<ArtifactStored>(R.putLayer.method, pathTo(R.putLayer, { layerId }), {
      body, timeoutMs: 3_600_000,
      headers: { ...(meta.sha256 ? { [LAYER_SHA256_HEADER]: meta.sha256 } : {}), 'content-length': String(meta.sizeBytes), 'content-type': 'application/octet-stream' },
    });
  }
  /** What the store holds under the id (its sha256 and size); undefined when nothing. */
  async artifactInfo(artifactId: string): Promise<ArtifactStored | undefined> {
    try {
      return await call(this.http, R.artifactInfo, { artifactId });
    } catch (err) {
      if ((err as { status?: number }).status === 404) return undefined;
      throw err;
    }
  }
  /** Raw response for streaming the image (or following the redirect). */
  download(artifactId: string, method: 'GET' | 'HEAD' = 'GET') {
    return this.http.raw(method, pathTo(R.downloadArtifact, { artifactId }), { timeoutMs: 0, redirect: 'manual' });
  }
}
