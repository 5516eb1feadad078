/**
 * A real master (SQLite in a temporary directory) over the fake node agent, with one template,
 * `base`, resolved without a build: what the gateway's, the SDK's and the contract tests stand on.
 * FakeNodeAgent passes the node agent's contract suite (contracts/node-agent.contract.ts). The
 * node beats as a real agent does, so a test may run longer than the master's staleness limit;
 * E2B's DELETE /templates/{id} deletes snapshots through the template module's own function.
 * Snapshot layers go to a FakeTemplateCenter (it passes the template center's contract suite).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCodes, defaultConfig, freePort, MemoryCoordination, notFound, silentLogger, type SvcConfig } from '@svc/common';
import { startMaster, type Master, type MasterOptions } from '../index.ts';
import { HEARTBEAT_INTERVAL_MS } from '../nodes/registry.ts';
import { callerTeam } from '../teams/caller.ts';
import { deleteSnapshotNamed } from '../templates/index.ts';
import { documentRoute } from '../templates/routes/document-route.ts';
import { FakeTemplateCenter } from '../templates/testing/fake-template-center.ts';
import { FakeNodeAgent } from './fake-node-agent.ts';

export interface MasterOverFakeNode {
  /** The config the master started with; the caller's edits before start are in it. */
  cfg: SvcConfig;
  master: Master;
  node: FakeNodeAgent;
  templateCenter: FakeTemplateCenter;
  /** The master's coordination store: a test may hold a lock as another master would. */
  coordination: MemoryCoordination;
  close(): Promise<void>;
}

export async function startMasterOverFakeNode(configure: (cfg: SvcConfig) => void = () => {}, opts: Pick<MasterOptions, 'webhookDelivery'> = {}): Promise<MasterOverFakeNode> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-master-'));
  const cfg = defaultConfig(dir);
  cfg.master.database = { driver: 'sqlite', path: join(dir, 'm.sqlite') };
  // The fakes listen first: started after the master's port was picked (and freed), one of them
  // could be given that same port, and the master's listen then failed (EADDRINUSE in .ci/run).
  const templateCenter = await new FakeTemplateCenter('tc-token').start();
  const node = await new FakeNodeAgent().start();
  // Its address is in the layer download URLs it gives nodes, so the port is known before it starts.
  const port = await freePort();
  cfg.master.listen = `127.0.0.1:${port}`;
  cfg.master.addr = `http://127.0.0.1:${port}`;
  cfg.api.listen = '127.0.0.1:0';
  cfg.template_center.addr = templateCenter.url;
  cfg.template_center.callback_token = 'tc-token';
  configure(cfg);
  const coordination = new MemoryCoordination();
  const master = await startMaster(cfg, {
    logger: silentLogger(), coordination, ...opts,
    templates: async ({ app, snapshots }) => {
      documentRoute(app)<{ Params: { templateID: string } }>('DELETE', '/templates/{templateID}', async (req, reply) => {
        await deleteSnapshotNamed(snapshots, req.params.templateID, callerTeam(req));
        return reply.status(204).send();
      });
      return {
        resolver: {
          async resolveForCreate(ref: string) {
            if (ref !== 'base') throw notFound(`template ${ref} not found`, ErrorCodes.templateNotFound);
            return {
              templateId: 'tpl-base', alias: 'base', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024,
              artifact: { artifactId: 'a', sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/' },
            };
          },
          async idsFor(ref: string) { return ref === 'base' ? ['tpl-base'] : [ref]; },
          async artifactRef(artifactId: string) { return { artifactId, sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/' }; },
        },
        onNodeRegistered() {},
        async close() {},
      };
    },
  });
  await master.nodes.register({
    nodeId: 'n1', address: node.url, runtime: 'gvisor', pauseKinds: ['freeze', 'filesystem'],
    capacity: { cpuCount: 8, memoryMB: 16384 }, pausedResourceReleaseRatio: 0, version: 't',
  });
  const beat = setInterval(() => {
    const sandboxes = [...node.sandboxes.values()];
    const running = sandboxes.filter((s) => s.state === 'running');
    master.nodes.heartbeat('n1', {
      sandboxes: { running: running.length, paused: sandboxes.length - running.length },
      usedMemoryMB: running.reduce((sum, s) => sum + s.memoryMB, 0),
    }).catch((err: Error) => { process.stderr.write(`the fake node's heartbeat failed: ${err.message}\n`); });
  }, HEARTBEAT_INTERVAL_MS);
  beat.unref();
  return {
    cfg, master, node, templateCenter, coordination,
    async close() {
      clearInterval(beat);
      await master.close();
      await node.close();
      await templateCenter.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
