/**
 * A node agent stand-in for the template tests: only the artifact routes of the node-agent
 * contract, and it passes that contract's suite (contracts/node-agent.contract.ts).
 * ensureArtifact really downloads from the URL the master gives (through the master's download
 * route) and checks the sha256, so distribution is tested end to end on the master's side.
 */
import { createHash } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { compileValidator, schemaError, sendError, SvcError, type ServedRoute } from '@svc/common';
import { NODE_AGENT_ROUTES as R, type ArtifactOnNode } from '@svc/contracts/node-agent';
import { serve } from '@svc/contracts/route-table';

export class FakeArtifactNode {
  readonly artifacts = new Map<string, ArtifactOnNode>();
  /** Set to make ensureArtifact / deleteArtifact answer this status. */
  failEnsureWith: number | null = null;
  failDeleteWith: number | null = null;
  url = '';
  private app!: FastifyInstance;
  /** The routes it registered (its contract suite checks them against NODE_AGENT_ROUTES). */
  readonly served: ServedRoute[] = [];

  constructor(readonly nodeId: string, private readonly log: string[] = []) {}

  async start(): Promise<this> {
    // Bodies are checked against NODE_AGENT_ROUTES' schemas as the real agent checks them
    // (common/schema-validation.ts), and a refusal answered as its are: 400 naming the field.
    const app = Fastify({ schemaErrorFormatter: (errors, dataVar) => schemaError(errors as Parameters<typeof schemaError>[0], dataVar) });
    app.setValidatorCompiler(compileValidator);
    app.setErrorHandler(async (err, _req, reply) => {
      if (err instanceof SvcError) return sendError(reply, err);
      throw err;
    });
    app.addHook('onRoute', (r) => { this.served.push({ method: r.method, url: r.url }); });
    serve(app, R.health, async () => ({ ok: true, nodeId: this.nodeId, tasks: {} }));
    serve(app, R.ensureArtifact, async (req, reply) => {
      this.log.push(`node ${this.nodeId} ensure ${req.params.id}`);
      if (this.failEnsureWith) return reply.status(this.failEnsureWith).send({ code: this.failEnsureWith, message: 'disk full' });
      const have = this.artifacts.get(req.params.id);
      if (have && have.sha256 !== req.body.sha256.toLowerCase()) return reply.status(409).send({ code: 409, message: `artifact is here with sha256 ${have.sha256}` });
      if (have) return have;
      const res = await fetch(req.body.downloadUrl);
      if (!res.ok) return reply.status(502).send({ code: 502, message: `download failed: ${res.status}` });
      const data = Buffer.from(await res.arrayBuffer());
      const sha256 = createHash('sha256').update(data).digest('hex');
      if (sha256 !== req.body.sha256) return reply.status(502).send({ code: 502, message: 'sha256 mismatch' });
      const a: ArtifactOnNode = { artifactId: req.params.id, sha256, sizeBytes: data.length, path: `/node/${req.params.id}.ext4` };
      this.artifacts.set(req.params.id, a);
      return a;
    });
    serve(app, R.deleteArtifact, async (req, reply) => {
      this.log.push(`node ${this.nodeId} delete ${req.params.id}`);
      if (this.failDeleteWith) return reply.status(this.failDeleteWith).send({ code: this.failDeleteWith, message: 'busy' });
      this.artifacts.delete(req.params.id);
      return reply.status(204).send();
    });
    serve(app, R.listArtifacts, async () => [...this.artifacts.values()]);
    await app.listen({ host: '127.0.0.1', port: 0 });
    this.app = app;
    this.url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    return this;
  }

  async close(): Promise<void> {
    await this.app?.close();
  }
}
