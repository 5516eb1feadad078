/**
 * A node agent stand-in for the master's unit tests only: it implements the node-agent contract
 * over HTTP with an in-memory table and lets a test script failures and delays; it passes the
 * same contract suite as the real agent (contracts/node-agent.contract.ts). Whole-platform tests
 * use the real node agent.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { compileValidator, schemaError, sendError, type ServedRoute } from '@svc/common';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { LAYER_SHA256_HEADER, NODE_AGENT_ROUTES as R, type CreateSandboxOnNode, type ExecStreamLine, type LayerOnNode, type NodeSandbox } from '@svc/contracts/node-agent';
import { serve } from '@svc/contracts/route-table';
import type { SandboxLogEntry } from '@svc/contracts/node-agent';
import { parseSandboxLogsQuery, pickSandboxLogs } from '@svc/contracts/sandbox-logs';
import { SvcError } from '@svc/common';

export interface FakeNodeBehaviour {
  createDelayMs: number;
  deleteDelayMs: number;
  pauseDelayMs: number;
  failCreate: boolean;
  /** When set, resume answers 409 with this message and code 130409. */
  refuseResume?: string;
  /** When set, create answers 503 with this message, as a full node's admission does. */
  refuseCreate?: string;
}

export class FakeNodeAgent {
  readonly sandboxes = new Map<string, NodeSandbox>();
  readonly layers = new Map<string, LayerOnNode>();
  /** What each layer's archive holds (random bytes standing in for a tar). */
  readonly layerBytes = new Map<string, Buffer>();
  /** The artifact each sandbox was created from (what its layer lies over). */
  private readonly artifactOf = new Map<string, string>();
  readonly calls: string[] = [];
  /** Each create's body as it arrived (what the master sent). */
  readonly createBodies = new Map<string, CreateSandboxOnNode>();
  /** Each sandbox's log in the order written, as the real agent's console holds it at start; a test may add entries. */
  readonly logs = new Map<string, SandboxLogEntry[]>();
  readonly behaviour: FakeNodeBehaviour = { createDelayMs: 0, deleteDelayMs: 0, pauseDelayMs: 0, failCreate: false };
  private app!: FastifyInstance;
  /** The routes it registered (its contract suite checks them against NODE_AGENT_ROUTES). */
  readonly served: ServedRoute[] = [];
  url = '';
  private ip = 2;

  async start(): Promise<this> {
    // Bodies and the logs query are checked against NODE_AGENT_ROUTES' schemas as the real agent
    // checks them (common/schema-validation.ts), and a refusal answered as its are: 400 naming the field.
    const app = Fastify({ schemaErrorFormatter: (errors, dataVar) => schemaError(errors as Parameters<typeof schemaError>[0], dataVar) });
    app.setValidatorCompiler(compileValidator);
    app.setErrorHandler(async (err, _req, reply) => {
      if (err instanceof SvcError) return sendError(reply, err);
      throw err;
    });
    app.addHook('onRoute', (r) => { this.served.push({ method: r.method, url: r.url }); });
    const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
    serve(app, R.createSandbox, async (req, reply) => {
      this.calls.push(`create ${req.body.sandboxId}`);
      this.createBodies.set(req.body.sandboxId, req.body as CreateSandboxOnNode);
      await wait(this.behaviour.createDelayMs);
      if (this.behaviour.failCreate) return reply.status(500).send({ code: 500, message: 'runsc failed' });
      if (this.behaviour.refuseCreate) return reply.status(503).send({ code: 503, message: this.behaviour.refuseCreate });
      const ref = req.body.layer;
      let layer = ref && this.layers.get(ref.layerId);
      if (ref && layer && layer.sha256 !== ref.sha256) return reply.status(409).send({ code: 409, message: `layer ${ref.layerId} is here with another sha256` });
      if (ref && !layer) {
        if (!ref.downloadUrl) return reply.status(404).send({ code: 404, message: `layer ${ref.layerId} is not on this node` });
        const res = await fetch(ref.downloadUrl).catch((err: Error) => err);
        if (res instanceof Error) return reply.status(502).send({ code: 502, message: `layer ${ref.layerId}: download failed: ${res.message}` });
        const bytes = res.ok ? Buffer.from(await res.arrayBuffer()) : undefined;
        if (!bytes || createHash('sha256').update(bytes).digest('hex') !== ref.sha256) {
          return reply.status(502).send({ code: 502, message: `layer ${ref.layerId}: download failed or its sha256 differs` });
        }
        layer = { layerId: ref.layerId, sha256: ref.sha256, sizeBytes: bytes.length, artifactId: req.body.artifact.artifactId, contents: 'filesystem', createdAt: new Date().toISOString() };
        this.layers.set(ref.layerId, layer);
        this.layerBytes.set(ref.layerId, bytes);
        this.calls.push(`download layer ${ref.layerId}`);
      }
      if (layer && layer.artifactId !== req.body.artifact.artifactId) return reply.status(409).send({ code: 409, message: 'layer lies over another artifact' });
      this.artifactOf.set(req.body.sandboxId, req.body.artifact.artifactId);
      const s: NodeSandbox = {
        sandboxId: req.body.sandboxId, templateId: req.body.templateId, state: 'running', address: `10.99.0.${this.ip++}`,
        envdPort: 49983, envdVersion: '0.6.4', runtime: req.body.runtime ?? 'gvisor', cpuCount: req.body.cpuCount, memoryMB: req.body.memoryMB,
        startedAt: new Date().toISOString(),
      };
      this.sandboxes.set(s.sandboxId, s);
      this.logs.set(s.sandboxId, [
        { timestamp: s.startedAt, level: 'info', message: 'sandbox booting', fields: { logger: 'node-agent' } },
        { timestamp: s.startedAt, level: 'info', message: `envd ${s.envdVersion} listening on 0.0.0.0:${s.envdPort}`, fields: { logger: 'envd' } },
      ]);
      return reply.status(201).send(s);
    });
    serve(app, R.listSandboxes, async () => [...this.sandboxes.values()]);
    serve(app, R.getSandbox, async (req, reply) => {
      const s = this.sandboxes.get(req.params.id);
      return s ?? reply.status(404).send({ code: 404, message: 'not found' });
    });
    serve(app, R.deleteSandbox, async (req, reply) => {
      this.calls.push(`delete ${req.params.id}`);
      await wait(this.behaviour.deleteDelayMs);
      this.logs.delete(req.params.id);
      if (!this.sandboxes.delete(req.params.id)) return reply.status(404).send({ code: 404, message: 'not found' });
      return reply.status(204).send();
    });
    serve(app, R.updateNetwork, async (req, reply) => {
      this.calls.push(`network ${req.params.id} ${JSON.stringify(req.body)}`);
      const s = this.sandboxes.get(req.params.id);
      if (!s) return reply.status(404).send({ code: 404, message: 'not found' });
      if (s.state === 'paused') return reply.status(409).send({ code: 409, message: 'paused' });
      return s;
    });
    serve(app, R.pauseSandbox, async (req, reply) => {
      const body = req.body || undefined;
      this.calls.push(`pause ${req.params.id}`);
      await wait(this.behaviour.pauseDelayMs);
      const s = this.sandboxes.get(req.params.id);
      if (!s) return reply.status(404).send({ code: 404, message: 'not found' });
      if (s.state === 'paused') return reply.status(409).send({ code: 409, message: 'already paused' });
      s.state = 'paused';
      s.pauseKind = body?.memory === false ? 'filesystem' : 'freeze';
      return s;
    });
    serve(app, R.resumeSandbox, async (req, reply) => {
      const body = req.body || undefined;
      this.calls.push(`resume ${req.params.id}${body?.envVars ? ' with identity' : ''}`);
      const s = this.sandboxes.get(req.params.id);
      if (!s) return reply.status(404).send({ code: 404, message: 'not found' });
      if (this.behaviour.refuseResume) return reply.status(409).send({ code: 130409, message: this.behaviour.refuseResume });
      const fromFiles = s.pauseKind === 'filesystem' || (s.state === 'paused' && body?.memory === false);
      if (fromFiles && !body?.envVars) return reply.status(400).send({ code: 400, message: 'envVars are required to boot it again' });
      s.state = 'running';
      delete s.pauseKind;
      return s;
    });
    serve(app, R.snapshotSandbox, async (req, reply) => {
      this.calls.push(`snapshot ${req.params.id}`);
      const { layerId } = req.body;
      const s = this.sandboxes.get(req.params.id);
      if (!s) return reply.status(404).send({ code: 404, message: 'not found' });
      if (this.layers.has(layerId)) return reply.status(409).send({ code: 409, message: 'layer exists' });
      // A paused sandbox is captured as it lies, unless it is frozen (as the real agent).
      if (s.pauseKind === 'freeze') return reply.status(409).send({ code: 409, message: 'frozen; cannot be captured' });
      const bytes = randomBytes(10_240);
      const layer: LayerOnNode = {
        layerId, sha256: createHash('sha256').update(bytes).digest('hex'), sizeBytes: bytes.length, artifactId: this.artifactOf.get(s.sandboxId) ?? '',
        sandboxId: s.sandboxId, contents: 'filesystem', createdAt: new Date().toISOString(),
      };
      this.layers.set(layerId, layer);
      this.layerBytes.set(layerId, bytes);
      return reply.status(201).send(layer);
    });
    // Commands run on the host, as the test's user: enough for the contract's exit codes, output, cwd and env.
    serve(app, R.exec, async (req, reply) => {
      const b = req.body;
      const s = this.sandboxes.get(req.params.id);
      if (!s) return reply.status(404).send({ code: 404, message: 'not found' });
      if (s.state === 'paused') return reply.status(409).send({ code: 409, message: 'paused' });
      this.calls.push(`exec ${req.params.id} ${b.command}`);
      let input: Buffer | undefined;
      if (b.stdin) {
        const res = await fetch(b.stdin.url);
        input = Buffer.from(await res.arrayBuffer());
        if (!res.ok || createHash('sha256').update(input).digest('hex') !== b.stdin.sha256 || input.length !== b.stdin.sizeBytes) {
          return reply.status(502).send({ code: 502, message: `exec input: ${res.status}, or sha256 or size mismatch` });
        }
      }
      const child = spawn('/bin/sh', ['-c', b.command], { cwd: b.cwd ?? '/', env: { PATH: process.env.PATH, ...b.envVars }, timeout: b.timeoutMs ?? 600_000 });
      child.stdin.on('error', () => { /* the command may exit before reading its input */ });
      child.stdin.end(input ?? '');
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'application/x-ndjson' });
      const send = (line: ExecStreamLine) => reply.raw.write(`${JSON.stringify(line)}\n`);
      const out = { stdout: '', stderr: '' };
      child.stdout.setEncoding('utf8').on('data', (d: string) => { out.stdout += d; send({ stdout: d }); });
      child.stderr.setEncoding('utf8').on('data', (d: string) => { out.stderr += d; send({ stderr: d }); });
      child.on('close', (code) => { send({ result: { exitCode: code ?? 124, ...out } }); reply.raw.end(); });
    });
    serve(app, R.listLayers, async () => [...this.layers.values()]);
    serve(app, R.layerArchive, async (req, reply) => {
      const layer = this.layers.get(req.params.id);
      const bytes = this.layerBytes.get(req.params.id);
      if (!layer || !bytes) return reply.status(404).send({ code: 404, message: 'not found' });
      return reply.header('content-type', 'application/x-tar').header(LAYER_SHA256_HEADER, layer.sha256).send(bytes);
    });
    serve(app, R.deleteLayer, async (req, reply) => {
      this.calls.push(`delete layer ${req.params.id}`);
      this.layerBytes.delete(req.params.id);
      if (!this.layers.delete(req.params.id)) return reply.status(404).send({ code: 404, message: 'not found' });
      return reply.status(204).send();
    });
    serve(app, R.metrics, async () => ({
      timestampUnix: Math.floor(Date.now() / 1000), cpuCount: 1, cpuUsedPct: 1.5, memUsed: 1, memTotal: 2, memCache: 0, diskUsed: 1, diskTotal: 2,
    }));
    serve(app, R.sandboxLogs, async (req, reply) => {
      if (!this.sandboxes.has(req.params.id)) return reply.status(404).send({ code: 404, message: 'not found' });
      try {
        return { logs: pickSandboxLogs(this.logs.get(req.params.id) ?? [], parseSandboxLogsQuery(req.query)) };
      } catch (err) {
        if (err instanceof SvcError) return reply.status(err.status).send(err.toBody());
        throw err;
      }
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    this.app = app;
    this.url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    return this;
  }

  async close() { await this.app.close(); }
}
