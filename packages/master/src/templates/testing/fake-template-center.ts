/**
 * A template center stand-in for the master's template tests: it implements the /tc/api/v1 contract
 * over HTTP, records what the master asked, and lets the test decide the answers. Callbacks to the
 * master are sent by the test (callback()), so every step of a build is under the test's control.
 * It passes the template center's contract suite (contracts/template-center.contract.ts).
 */
import { createHash } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { pathTo, serve } from '@svc/contracts/route-table';
import { TEMPLATE_CALLBACK_ROUTES } from '@svc/contracts/template-callback';
import { CALLBACK_TOKEN_HEADER, LAYER_SHA256_HEADER, TEMPLATE_CENTER_ROUTES as T, type ArtifactStored, type BuildRequest, type JobStatusReport } from '@svc/contracts/template-center';

export class FakeTemplateCenter {
  readonly builds: BuildRequest[] = [];
  readonly deletes: string[] = [];
  /** Job ids the master asked to cancel, in order. */
  readonly cancels: string[] = [];
  readonly migrations: Array<{ artifactId: string; localPath: string }> = [];
  readonly downloads: Array<{ method: string; artifactId: string }> = [];
  /** Layer uploads (PUT /tc/api/v1/layer/:id) as they arrived, kept or not. */
  readonly layerPuts: Array<{ layerId: string; sha256: string; sizeBytes: number }> = [];
  /** Artifact bytes served by GET /tc/api/v1/artifact/:id. */
  readonly files = new Map<string, Buffer>();
  /** When set for an artifact, downloads answer 302 there. */
  readonly redirects = new Map<string, string>();
  /** Set to make /build answer this status. */
  failBuildWith: number | null = null;
  /** Set to make /build close the connection without an answer (a template center that went away). */
  dropBuild = false;
  failDeleteWith: number | null = null;
  /** Set to make cancels answer this status. */
  failCancelWith: number | null = null;
  /** Set to make layer uploads answer this status (507, say). */
  failLayerWith: number | null = null;
  /** Records the order of calls across the fakes (shared with the node agents). */
  log: string[] = [];
  url = '';
  private app!: FastifyInstance;

  constructor(private readonly token: string) {}

  async start(): Promise<this> {
    const app = Fastify();
    app.addHook('onRequest', async (req, reply) => {
      if (!req.url.startsWith('/tc/api/v1')) return;
      if (this.token && req.headers[CALLBACK_TOKEN_HEADER] !== this.token) return reply.status(401).send({ code: 401, message: 'wrong token' });
    });
    serve(app, T.health, async () => ({ ok: true, store: 'local' }));
    serve(app, T.build, async (req, reply) => {
      const body = req.body as BuildRequest;
      this.log.push(`tc build ${body.jobId}`);
      if (this.dropBuild) {
        req.raw.socket.destroy();
        return reply.hijack();
      }
      if (this.failBuildWith) return reply.status(this.failBuildWith).send({ code: this.failBuildWith, message: 'build refused by the fake' });
      this.builds.push(body);
      return reply.status(202).send({ jobId: body.jobId });
    });
    serve(app, T.cancelBuild, async (req, reply) => {
      const { jobId } = req.params;
      this.log.push(`tc cancel ${jobId}`);
      if (this.failCancelWith) return reply.status(this.failCancelWith).send({ code: this.failCancelWith, message: 'cancel refused by the fake' });
      this.cancels.push(jobId);
      // A build the fake got runs until the test stores its artifact (storeArtifact).
      const build = this.builds.find((b) => b.jobId === jobId);
      return { cancelled: !!build && !this.files.has(build.artifactId) };
    });
    serve(app, T.deleteArtifact, async (req, reply) => {
      const { artifactId } = req.body as { artifactId: string };
      this.log.push(`tc delete ${artifactId}`);
      if (this.failDeleteWith) return reply.status(this.failDeleteWith).send({ code: this.failDeleteWith, message: 'delete refused by the fake' });
      this.deletes.push(artifactId);
      return { deleted: this.files.delete(artifactId) };
    });
    serve(app, T.migrate, async (req) => {
      const body = req.body as { artifactId: string; localPath: string };
      this.migrations.push(body);
      const data = Buffer.from(`migrated ${body.artifactId}`);
      this.files.set(body.artifactId, data);
      return this.stored(body.artifactId, data);
    });
    app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer', bodyLimit: 256 * 1024 * 1024 }, (_req, body, done) => done(null, body));
    serve(app, T.putLayer, async (req, reply) => {
      const layerId = req.params.layerId;
      const data = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
      const sha256 = String(req.headers[LAYER_SHA256_HEADER] ?? '');
      this.log.push(`tc put layer ${layerId}`);
      this.layerPuts.push({ layerId, sha256, sizeBytes: data.length });
      if (this.failLayerWith) return reply.status(this.failLayerWith).send({ code: this.failLayerWith, message: 'layer refused by the fake' });
      const stored = this.files.get(layerId);
      if (stored) {
        const record = this.stored(layerId, stored);
        if (sha256 && record.sha256 !== sha256) return reply.status(409).send({ code: 409, message: `layer ${layerId} is stored with another sha256` });
        return record;
      }
      const record = this.stored(layerId, data);
      if ((sha256 && record.sha256 !== sha256) || data.length !== Number(req.headers['content-length'])) {
        return reply.status(400).send({ code: 400, message: `layer ${layerId}: sha256 or size do not match what arrived` });
      }
      this.files.set(layerId, data);
      return record;
    });
    serve(app, T.artifactInfo, async (req, reply) => {
      const data = this.files.get(req.params.artifactId);
      if (!data) return reply.status(404).send({ code: 404, message: 'no such artifact' });
      return this.stored(req.params.artifactId, data);
    });
    serve(app, T.downloadArtifact, async (req, reply) => {
      const artifactId = req.params.artifactId;
      this.downloads.push({ method: req.method, artifactId });
      const to = this.redirects.get(artifactId);
      if (to) return reply.redirect(to, 302);
      const data = this.files.get(artifactId);
      if (!data) return reply.status(404).send({ code: 404, message: 'no such artifact' });
      // For a HEAD, fastify sends the headers of this answer without its body.
      reply.header('content-type', 'application/octet-stream').header('content-length', String(data.length));
      return reply.send(data);
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    this.app = app;
    this.url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    return this;
  }

  /** What a finished build stores: the test's bytes become the artifact. */
  storeArtifact(artifactId: string, content = `ext4 of ${artifactId}`): ArtifactStored {
    const data = Buffer.from(content);
    this.files.set(artifactId, data);
    return this.stored(artifactId, data);
  }

  lastBuild(): BuildRequest {
    const b = this.builds.at(-1);
    if (!b) throw new Error('the fake template center got no build');
    return b;
  }

  /** Posts a status callback to the master as the real template center would. */
  async callback(masterUrl: string, jobId: string, report: JobStatusReport, token: string | null = this.token): Promise<number> {
    const res = await fetch(`${masterUrl}${pathTo(TEMPLATE_CALLBACK_ROUTES.status, { jobId })}`, {
      method: 'POST', body: JSON.stringify(report),
      headers: { 'content-type': 'application/json', ...(token !== null ? { [CALLBACK_TOKEN_HEADER]: token } : {}) },
    });
    await res.text();
    return res.status;
  }

  async close(): Promise<void> {
    await this.app?.close();
  }

  private stored(artifactId: string, data: Buffer): ArtifactStored {
    return {
      artifactId, sha256: createHash('sha256').update(data).digest('hex'), sizeBytes: data.length,
      storage: 'local', location: `/var/lib/tc/${artifactId}.ext4`,
    };
  }
}
