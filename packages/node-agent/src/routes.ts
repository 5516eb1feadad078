import type { FastifyInstance } from 'fastify';
import { sendMetrics, toSvcError, type TaskStats } from '@svc/common';
import { LAYER_SHA256_HEADER, NODE_AGENT_ROUTES as R, type ExecStreamLine, type NodeInfo } from '@svc/contracts/node-agent';
import { serve } from '@svc/contracts/route-table';
import type { NodeSandboxes } from './sandboxes/node-sandboxes.ts';
import type { NodeArtifacts } from './artifacts/node-artifacts.ts';
import type { VolumeAttachments } from './volumes/attachments.ts';
import { checkSandboxId, parseCreate, parseExec, parseEnsureArtifact, parseLogsQuery, parseNetworkUpdate, parsePause, parseResume, parseSnapshot } from './validate.ts';
import { checkLayerId, type LayerStore } from './artifacts/layer-store.ts';
import { checkArtifactId } from './artifacts/artifact-store.ts';

export interface RouteDeps {
  sandboxes: NodeSandboxes;
  artifacts: NodeArtifacts;
  /** Layers captured from sandboxes (snapshots), served to other nodes and removed by the master. */
  layers: LayerStore;
  nodeInfo: () => NodeInfo;
  nodeId: string;
  /** How the agent's background tasks fare (health). */
  tasks: () => Record<string, TaskStats>;
  createDefaults: { diskSizeMB: number; timeoutMs: number };
  volumes: VolumeAttachments;
}

/**
 * The routes of NODE_AGENT_ROUTES (packages/contracts/src/node-agent-routes.ts), each with its
 * schemas; routes.test.ts holds the two the same.
 */
export function registerRoutes(app: FastifyInstance, d: RouteDeps) {
  const s = d.sandboxes;
  const id = (params: { id: string }) => { checkSandboxId(params.id); return params.id; };

  serve(app, R.health, async () => ({ ok: true, nodeId: d.nodeId, tasks: d.tasks() }));
  serve(app, R.info, async () => d.nodeInfo());
  // The process's Prometheus metrics; on the node's network, like every route here (docs/observability.md).
  serve(app, R.prometheus, async (_req, reply) => sendMetrics(reply));

  serve(app, R.createSandbox, async (req, reply) => reply.status(201).send(await s.create(parseCreate(req.body, d.createDefaults))));
  serve(app, R.listSandboxes, async () => s.list());
  serve(app, R.getSandbox, async (req) => s.get(id(req.params)));
  serve(app, R.deleteSandbox, async (req, reply) => {
    const ext = await s.delete(id(req.params));
    // 204 as ever, unless volume counts flipped: then the flips (older masters ignore the body).
    return ext.volumeRefFlips?.length ? reply.status(200).send(ext) : reply.status(204).send();
  });
  serve(app, R.pauseSandbox, async (req) => s.pause(id(req.params), parsePause(req.body)));
  serve(app, R.updateNetwork, async (req) => s.updateNetwork(id(req.params), parseNetworkUpdate(req.body)));
  serve(app, R.snapshotSandbox, async (req, reply) => reply.status(201).send(await s.snapshot(id(req.params), parseSnapshot(req.body))));
  serve(app, R.resumeSandbox, async (req) => s.resume(id(req.params), parseResume(req.body)));
  serve(app, R.metrics, async (req) => s.metrics(id(req.params)));
  serve(app, R.exec, async (req, reply) => {
    const sandboxId = id(req.params);
    const body = parseExec(req.body);
    // The answer starts with the first line: an error before it is an ordinary error answer.
    let started = false;
    const send = (line: ExecStreamLine) => {
      if (!started) {
        started = true;
        reply.hijack();
        reply.raw.writeHead(200, { 'content-type': 'application/x-ndjson' });
      }
      reply.raw.write(`${JSON.stringify(line)}\n`);
    };
    try {
      send({ result: await s.exec(sandboxId, body, (stream, text) => send(stream === 'stdout' ? { stdout: text } : { stderr: text })) });
    } catch (err) {
      if (!started) throw err;
      const e = toSvcError(err);
      send({ error: { status: e.status, message: e.message } });
    }
    reply.raw.end();
  });
  serve(app, R.sandboxLogs, async (req) => s.logs(id(req.params), parseLogsQuery(req.query)));
  serve(app, R.endedSandboxes, async () => s.ended());

  serve(app, R.listLayers, async () => d.layers.list());
  serve(app, R.layerArchive, async (req, reply) => {
    const { layer, stream } = d.layers.openArchive(checkLayerId(req.params.id));
    return reply.header('content-type', 'application/x-tar').header('content-length', String(layer.sizeBytes))
      .header(LAYER_SHA256_HEADER, layer.sha256).send(stream);
  });
  serve(app, R.deleteLayer, async (req, reply) => {
    await d.layers.remove(checkLayerId(req.params.id));
    return reply.status(204).send();
  });

  serve(app, R.volumeAttachments, async () => d.volumes.list());

  serve(app, R.listArtifacts, async () => d.artifacts.list());
  serve(app, R.ensureArtifact, async (req) => d.artifacts.ensure(req.params.id, parseEnsureArtifact(req.body, req.params.id)));
  serve(app, R.deleteArtifact, async (req, reply) => {
    checkArtifactId(req.params.id);
    await d.artifacts.delete(req.params.id);
    return reply.status(204).send();
  });
}
