import { conflict, SvcError, type Logger } from '@svc/common';
import type { CreateSandboxOnNode, LayerContents, NodeSandbox, RuntimeKind } from '@svc/contracts/node-agent';
import type { VolumeRefFlip } from '@svc/contracts/volumes';
import type { ArtifactStore } from '../artifacts/artifact-store.ts';
import type { LayerStore } from '../artifacts/layer-store.ts';
import { normalizePolicy, samePolicy, type EgressPolicy } from '../network/egress-policy.ts';
import type { Firewall } from '../network/firewall.ts';
import type { InstanceResources } from '../runtime/driver.ts';
import type { RuntimeDrivers } from '../runtime/drivers.ts';
import type { VolumeAttachments } from '../volumes/attachments.ts';
import { createError } from './errors.ts';
import type { Instance, InstanceLauncher } from './instances.ts';
import type { MemoryAdmission } from './memory-admission.ts';
import type { SandboxNetworkPolicy } from './network-policy.ts';
import { personalise } from './personalise.ts';
import type { RecordStore } from './record.ts';
import type { SandboxTable } from './sandbox-table.ts';
import { view, withFlips } from './sandbox-view.ts';
import { sandboxHolder } from './volume-holds.ts';
import type { WarmPool } from './warm-pool.ts';

/** Free space a node keeps on its state disk for the sandboxes it runs (checkDiskRoom). */
const DISK_RESERVE_BYTES = 2 * 1_073_741_824;

export interface CreateDeps {
  logger: Logger;
  launcher: InstanceLauncher;
  drivers: RuntimeDrivers;
  artifacts: ArtifactStore;
  layers: LayerStore;
  firewall: Firewall;
  records: RecordStore;
  volumes: VolumeAttachments;
  /** The runtime warm sandboxes run on (creates on another runtime start cold). */
  warmRuntime?: RuntimeKind;
}

/**
 * Creates sandboxes: from the warm pool where one fits, else booted cold (over a captured layer
 * when the create names one, with its volumes attached), then given their identity (envd /init).
 */
export class SandboxCreator {
  /** Creates under way per artifact: an artifact is not deleted under them. */
  private readonly creating = new Map<string, number>();

  constructor(
    private readonly d: CreateDeps,
    private readonly table: SandboxTable,
    private readonly pool: WarmPool,
    private readonly network: SandboxNetworkPolicy,
    /** The node's real-memory admission (absent: creates are admitted by the master alone). */
    private readonly memory: () => MemoryAdmission | undefined,
  ) {}

  /**
   * A node whose state disk is nearly full takes no new sandbox: writable layers are sparse and
   * grow as sandboxes write, pauses and snapshots add to them, and a full disk fails every
   * sandbox's writes and every capture on the node, whoever's (found by a helper reading the node
   * agent as an attacker, 2026-11-30). The master asks the next node on a 503.
   */
  private async checkDiskRoom(): Promise<void> {
    const free = await this.d.layers.freeBytes();
    if (free >= DISK_RESERVE_BYTES) return;
    throw new SvcError(503, `this node's disk has ${(free / 1_073_741_824).toFixed(1)} GiB free, under the ${DISK_RESERVE_BYTES / 1_073_741_824} GiB it keeps for the sandboxes it runs: no new sandbox here`, { headers: { 'Retry-After': '30' } });
  }

  /** Creates of sandboxes on the artifact under way now. */
  creatingOn(artifactId: string): number {
    return this.creating.get(artifactId) ?? 0;
  }

  async create(req: CreateSandboxOnNode): Promise<NodeSandbox> {
    const { policy, ignored } = normalizePolicy({ allowInternetAccess: req.allowInternetAccess, ...req.network });
    if (ignored.length) this.d.logger.info({ sandboxId: req.sandboxId, ignored }, 'network entries this node cannot enforce at layer 3 were left out');
    await this.network.learnHosts(policy);
    const artifactId = req.artifact.artifactId;
    // A memory layer is a saved machine, which only the microvm runtime restores.
    const runtime = req.runtime ?? (req.layer?.contents === 'memory' && this.d.drivers.find('microvm') ? 'microvm' : undefined);
    const driver = this.d.drivers.forCreate(runtime);
    return this.table.locks.run(req.sandboxId, async () => {
      if (this.table.has(req.sandboxId)) throw conflict(`sandbox ${req.sandboxId} already exists on this node`);
      await this.checkDiskRoom();
      const admitted = await this.memory()?.admit(req.memoryMB);
      this.creating.set(artifactId, (this.creating.get(artifactId) ?? 0) + 1);
      const signal = AbortSignal.timeout(req.timeoutMs);
      const started = Date.now();
      try {
        await this.d.artifacts.ensure(artifactId, req.artifact);
        const resources = { cpuCount: req.cpuCount, memoryMB: req.memoryMB, diskSizeMB: req.diskSizeMB };
        // A warm sandbox booted with an empty writable layer and no volumes: one from a captured
        // layer, or with volumes (bound at boot), starts cold.
        const warm = req.layer || req.volumes?.length || driver.kind !== this.d.warmRuntime ? undefined : await this.fromWarmPool(req, resources, policy, signal);
        const { inst, flips } = warm ? { inst: warm, flips: [] } : await this.startCold(req, { resources, policy, signal, runtime: driver.kind });
        this.table.set(req.sandboxId, inst);
        this.d.logger.info({ sandboxId: req.sandboxId, ms: Date.now() - started, fromWarmPool: !!inst.record.fromWarmPool }, 'sandbox created');
        return withFlips(view(inst), flips);
      } catch (err) {
        throw createError(req, err, signal, this.d.logger);
      } finally {
        admitted?.();
        this.creating.set(artifactId, (this.creating.get(artifactId) ?? 1) - 1);
      }
    });
  }

  /** Boots a new instance for the sandbox (over its layer, if any) and gives it its identity; with the volume count flips its attachments caused. */
  private async startCold(
    req: CreateSandboxOnNode,
    o: { resources: InstanceResources; policy: EgressPolicy; signal: AbortSignal; runtime: RuntimeKind },
  ): Promise<{ inst: Instance; flips: VolumeRefFlip[] }> {
    const artifactId = req.artifact.artifactId;
    let flips: VolumeRefFlip[] = [];
    const launch = async (layerArchive?: string, layerContents?: LayerContents) => {
      const volumes = await this.d.volumes.attach(sandboxHolder(req.sandboxId), req.volumes ?? []);
      try {
        const launched = await this.d.launcher.launch({
          role: 'sandbox', sandboxId: req.sandboxId, templateId: req.templateId, artifactId, resources: o.resources, env: {},
          policy: o.policy, metadata: req.metadata, defaults: { defaultUser: req.defaultUser, defaultWorkdir: req.defaultWorkdir }, signal: o.signal, runtime: o.runtime,
          ...(layerArchive ? { layerArchive, layerContents } : {}), ...(volumes.attached.length ? { volumes: volumes.attached } : {}),
        });
        flips = volumes.flips;
        return launched;
      } catch (err) {
        await this.d.volumes.detach(sandboxHolder(req.sandboxId), volumes.attached.map((v) => v.volumeId));
        throw err;
      }
    };
    const layerRef = req.layer;
    if (layerRef) await this.d.layers.ensure(layerRef, artifactId);
    const launched = layerRef
      ? await this.d.layers.reading(layerRef.layerId, (archive, layer) => {
        if (layer.artifactId !== artifactId) throw conflict(`layer ${layerRef.layerId} lies over artifact ${layer.artifactId}, not ${artifactId}`);
        return launch(archive, layer.contents);
      })
      : await launch();
    await personalise(launched, req).catch(async (err: Error) => {
      await this.d.launcher.teardown(launched).catch((e: Error) => this.d.logger.error({ instanceId: launched.record.instanceId, err: e.message }, 'teardown after a failed /init left something behind'));
      await this.d.volumes.detach(sandboxHolder(req.sandboxId), (launched.record.volumes ?? []).map((v) => v.volumeId));
      throw err;
    });
    return { inst: launched, flips };
  }

  /**
   * The create's policy in place of the warm one (WARM_POLICY). Nothing of the warm sandbox's
   * connection tracking is forgotten: under WARM_POLICY nothing from it is accepted, so no flow of
   * its own is ever tracked. A forget here (2026-12-01) ran in the background after the create
   * could have answered, and deleted the user's first fresh NAT entries (DNS, a first connection).
   */
  private async handOutNetwork(inst: Instance, policy: EgressPolicy): Promise<void> {
    if (!samePolicy(inst.record.policy, policy)) await this.d.firewall.update(inst.record.instanceId, policy);
  }

  private async fromWarmPool(req: CreateSandboxOnNode, resources: InstanceResources, policy: EgressPolicy, signal: AbortSignal): Promise<Instance | undefined> {
    const inst = await this.pool.take(req.artifact.artifactId, resources, req.templateId);
    if (!inst) return undefined;
    try {
      // A parked microvm clone reads its device state now: /init needs its envd.
      await this.d.launcher.unpark(inst, signal);
      await Promise.all([
        this.handOutNetwork(inst, policy),
        personalise(inst, req),
        this.d.launcher.foreground(inst),
      ]);
      Object.assign(inst.record, {
        role: 'sandbox', sandboxId: req.sandboxId, templateId: req.templateId, policy, metadata: req.metadata,
        fromWarmPool: true, startedAt: new Date().toISOString(), defaultUser: req.defaultUser, defaultWorkdir: req.defaultWorkdir,
      });
      await this.d.records.save(inst.record);
      return inst;
    } catch (err) {
      this.d.logger.warn({ err, sandboxId: req.sandboxId }, 'warm sandbox hand-out failed; starting cold');
      await this.d.launcher.teardown(inst).catch((e: Error) => this.d.logger.error({ instanceId: inst.record.instanceId, err: e.message }, 'teardown of a warm sandbox whose hand-out failed left something behind'));
      return undefined;
    }
  }
}
