import type { FastifyInstance } from 'fastify';
import { toSvcError, type TaskStats } from '@svc/common';
import { LAYER_SHA256_HEADER, NODE_AGENT_ROUTES as R, type ExecStreamLine, type NodeInfo } from '@svc/contracts/node-agent';
import type { NodeSandboxes } from './sandboxes/node-sandboxes.ts';
import type { NodeArtifacts } from './artifacts/node-artifacts.ts';
import type { VolumeAttachments } from './volumes/attachments.ts';
import { checkSandboxId, parseCreate, parseExec, parseEnsureArtifact, parseNetworkUpdate, parsePause, parseResume, parseSnapshot } from './validate.ts';
import { checkLayerId, type LayerStore } from './artifacts/layer-store.ts';
import { checkArtifactId } from './artifacts/artifact-store.ts';
import { parseSandboxLogsQuery } from '@svc/contracts/sandbox-logs';

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

type IdParams = { Params: { id: string } };

/** The routes of NODE_AGENT_ROUTES (packages/contracts/src/node-agent.ts); routes.test.ts holds the two the same. */
export function registerRoutes(app: FastifyInstance, d: RouteDeps) {
  const s = d.sandboxes;
  const id = (params: { id: string }) => { checkSandboxId(params.id); return params.id; };

  app.get(R.health.path, async () => ({ ok: true, nodeId: d.nodeId, tasks: d.tasks() }));
  app.get(R.info.path, async () => d.nodeInfo());

  app.post(R.createSandbox.path, async (req, reply) => reply.status(201).send(await s.create(parseCreate(req.body, d.createDefaults))));
  app.get(R.listSandboxes.path, async () => s.list());
  app.get<IdParams>(R.getSandbox.path, async (req) => s.get(id(req.params)));
  app.delete<IdParams>(R.deleteSandbox.path, async (req, reply) => {
    const ext = await s.delete(id(req.params));
    // 204 as ever, unless volume counts flipped: then the flips (older masters ignore the body).
    return ext.volumeRefFlips?.length ? reply.status(200).send(ext) : reply.status(204).send();
  });
  app.post<IdParams>(R.pauseSandbox.path, async (req) => s.pause(id(req.params), parsePause(req.body)));
  app.put<IdParams>(R.updateNetwork.path, async (req) => s.updateNetwork(id(req.params), parseNetworkUpdate(req.body)));
  app.post<IdParams>(R.snapshotSandbox.path, async (req, reply) => reply.status(201).send(await s.snapshot(id(req.params), parseSnapshot(req.body))));
  app.post<IdParams>(R.resumeSandbox.path, async (req) => s.resume(id(req.params), parseResume(req.body)));
  app.get<IdParams>(R.metrics.path, async (req) => s.metrics(id(req.params)));
  app.post<IdParams>(R.exec.path, async (req, reply) => {
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
  app.get<IdParams & { Querystring: Record<string, unknown> }>(R.sandboxLogs.path, async (req) => s.logs(id(req.params), parseSandboxLogsQuery(req.query)));
  app.get(R.endedSandboxes.path, async () => s.ended());

  app.get(R.listLayers.path, async () => d.layers.list());
  app.get<IdParams>(R.layerArchive.path, async (req, reply) => {
    const { layer, stream } = d.layers.openArchive(checkLayerId(req.params.id));
    return reply.header('content-type', 'application/x-tar').header('content-length', String(layer.sizeBytes))
      .header(LAYER_SHA256_HEADER, layer.sha256).send(stream);
  });
  app.delete<IdParams>(R.deleteLayer.path, async (req, reply) => {
    await d.layers.remove(checkLayerId(req.params.id));
    return reply.status(204).send();
  });

  app.get(R.volumeAttachments.path, async () => d.volumes.list());

  app.get(R.listArtifacts.path, async () => d.artifacts.list());
  app.post<IdParams>(R.ensureArtifact.path, async (req) => d.artifacts.ensure(req.params.id, parseEnsureArtifact(req.body, req.params.id)));
  app.delete<IdParams>(R.deleteArtifact.path, async (req, reply) => {
    checkArtifactId(req.params.id);
    await d.artifacts.delete(req.params.id);
    return reply.status(204).send();
  });
}
