import { SvcError, type Logger } from '@svc/common';
import { admissionRefusal, type CreateSandboxOnNode, type EndedSandbox, type LayerOnNode, type NetworkUpdateOnNode, type NodeSandbox, type PauseOnNode, type ResumeOnNode, type RuntimeKind, type SandboxLogs, type SandboxMetrics, type SnapshotSandboxOnNode } from '@svc/contracts/node-agent';
import type { SandboxLogSelection } from '@svc/contracts/sandbox-logs';
import type { ExtInfo } from '@svc/contracts/volumes';
import type { ArtifactStore } from '../artifacts/artifact-store.ts';
import type { ExecInputs } from '../artifacts/exec-input.ts';
import type { LayerStore } from '../artifacts/layer-store.ts';
import { WARM_POLICY } from '../network/egress-policy.ts';
import type { Firewall } from '../network/firewall.ts';
import type { HostLearner } from '../network/host-learner.ts';
import type { ExecOutput, InstanceResources } from '../runtime/driver.ts';
import type { RuntimeDrivers } from '../runtime/drivers.ts';
import { ENVD_WARM_UP_ENV } from '../runtime/runtime-bundle.ts';
import type { VolumeAttachments } from '../volumes/attachments.ts';
import { usedMemoryMB } from './admission.ts';
import { SandboxCapture } from './capture.ts';
import { readConsoleLog } from './console-log.ts';
import { SandboxCreator } from './create.ts';
import { wrap } from './errors.ts';
import { SandboxExec, type ExecRequest } from './exec.ts';
import type { Instance, InstanceLauncher } from './instances.ts';
import { LivenessSweep } from './liveness.ts';
import type { MemoryAdmission } from './memory-admission.ts';
import { MetricsReader } from './metrics.ts';
import { SandboxNetworkPolicy } from './network-policy.ts';
import { PauseResume } from './pause-resume.ts';
import type { RecordStore } from './record.ts';
import { SandboxTable } from './sandbox-table.ts';
import { view } from './sandbox-view.ts';
import { attachedVolumeIds, sandboxHolder } from './volume-holds.ts';
import { WarmPool } from './warm-pool.ts';
import { capConsoleFile } from '../runtime/console-file.ts';

export interface NodeSandboxesDeps {
  logger: Logger;
  launcher: InstanceLauncher;
  drivers: RuntimeDrivers;
  artifacts: ArtifactStore;
  /** Writable layers captured from sandboxes (snapshots). */
  layers: LayerStore;
  /** Standard input of execs, downloaded first (a build's context files). */
  execInputs: ExecInputs;
  firewall: Firewall;
  records: RecordStore;
  capacity: { cpuCount: number; memoryMB: number };
  releaseRatio: number;
  warmPoolSize: number;
  /** What a template's pool starts with (config warmPoolStart). */
  warmPoolInitial: number;
  warmPoolMax: number;
  warmShape: InstanceResources;
  /** The runtime warm sandboxes run on (creates on another runtime start cold). */
  warmRuntime?: RuntimeKind;
  /** Nominal memory quota of the release-ratio check (node memory x memory_overcommit; default capacity). */
  memoryQuotaMB?: number;
  /** Addresses of allowOut's host names (absent: host names allow nothing at layer 3). */
  hosts?: HostLearner;
  /** The node-local volume counts and plugins (docs/volumes.md). */
  volumes: VolumeAttachments;
}

/**
 * The node's sandboxes and the operations of api.ts on them, one lock per sandbox id; each kind
 * of operation lives in a module of its own (create.ts, pause-resume.ts, capture.ts, exec.ts,
 * metrics.ts, liveness.ts, network-policy.ts).
 */
export class NodeSandboxes {
  private readonly table: SandboxTable;
  readonly pool: WarmPool;
  private readonly creator: SandboxCreator;
  private readonly network: SandboxNetworkPolicy;
  private readonly pauses: PauseResume;
  private readonly capture: SandboxCapture;
  private readonly execs: SandboxExec;
  private readonly metricsReader: MetricsReader;
  private readonly liveness: LivenessSweep;
  private closing = false;
  /** The node's real-memory admission (absent: creates are admitted by the master alone). */
  private memory?: MemoryAdmission;

  constructor(private readonly d: NodeSandboxesDeps) {
    this.table = new SandboxTable(d.drivers);
    this.pool = new WarmPool({
      size: d.warmPoolSize,
      initial: d.warmPoolInitial,
      max: Math.max(d.warmPoolSize, d.warmPoolMax),
      shape: d.warmShape,
      logger: d.logger,
      // Room for a warm sandbox leaves room for two real creates besides.
      hasRoom: () => {
        const m = this.memory?.snapshot();
        return !m || admissionRefusal(m, d.warmShape.memoryMB, 2 * m.perSandboxMB) === undefined;
      },
      start: (artifactId, signal) => d.launcher.launch({
        // A warm sandbox reaches nothing until it is handed out (WARM_POLICY); the hand-out sets
        // the create's policy (create.ts). envd runs one command at boot, so that a user's first
        // is not the first (packages/envd/src/warm-up.ts).
        role: 'warm', templateId: '', artifactId, resources: d.warmShape, env: { [ENVD_WARM_UP_ENV]: '1' }, policy: WARM_POLICY, metadata: {}, runtime: d.warmRuntime,
        signal: AbortSignal.any([signal, AbortSignal.timeout(60_000)]),
      }),
      destroy: (inst) => d.launcher.teardown(inst),
    });
    this.network = new SandboxNetworkPolicy(d, this.table);
    this.creator = new SandboxCreator(d, this.table, this.pool, this.network, () => this.memory);
    this.pauses = new PauseResume(d, this.table);
    this.capture = new SandboxCapture(d, this.table);
    this.execs = new SandboxExec(d, this.table);
    this.metricsReader = new MetricsReader(this.table);
    this.liveness = new LivenessSweep(d, this.table, this.pool);
  }

  /** The token an instance's envd was given at /init (the microvm driver's way in); none before /init. */
  envdToken(instanceId: string): string | undefined {
    return [...this.table.all(), ...this.pool.instances()].find((i) => i.record.instanceId === instanceId)?.record.envdAccessToken;
  }

  /** Instances whose processes run now: handed-out sandboxes not paused, and warm ones. */
  runningInstances(): Instance[] {
    return [...this.table.all().filter((i) => i.record.phase === 'running'), ...this.pool.instances()];
  }

  useMemoryAdmission(memory: MemoryAdmission): void {
    this.memory = memory;
  }

  adopt(instances: Instance[]) {
    for (const inst of instances) {
      if (!inst.record.sandboxId) continue;
      this.table.set(inst.record.sandboxId, inst);
      if (inst.record.volumes?.length && !inst.record.volumesDetached) this.d.volumes.adopt(inst.record.sandboxId, inst.record.volumes);
    }
  }

  list(): NodeSandbox[] {
    return this.table.all().filter((i) => i.record.phase !== 'creating').map(view);
  }

  get(id: string): NodeSandbox {
    return view(this.table.find(id));
  }

  async create(req: CreateSandboxOnNode): Promise<NodeSandbox> {
    if (this.closing) throw new SvcError(503, 'node agent is shutting down');
    return this.creator.create(req);
  }

  /** Destroys a sandbox (running or paused); the answer carries the volume count flips. */
  async delete(id: string): Promise<ExtInfo> {
    return this.table.locks.run(id, async () => {
      const inst = this.table.find(id);
      const attached = attachedVolumeIds(inst);
      await this.d.launcher.teardown(inst).catch((err) => { throw wrap(`sandbox ${id}: destroy failed`, err, { logger: this.d.logger, sandboxId: id }); });
      this.table.remove(id);
      this.metricsReader.forget(inst.record.instanceId);
      const flips = await this.d.volumes.detach(sandboxHolder(id), attached);
      this.d.logger.info({ sandboxId: id, paused: inst.record.phase === 'paused' }, 'sandbox destroyed');
      return flips.length ? { volumeRefFlips: flips } : {};
    });
  }

  updateNetwork(id: string, update: NetworkUpdateOnNode): Promise<NodeSandbox> {
    return this.network.update(id, update);
  }

  relearnHosts(): Promise<void> {
    return this.network.relearnHosts();
  }

  pause(id: string, opts: PauseOnNode = {}): Promise<NodeSandbox> {
    return this.pauses.pause(id, opts);
  }

  resume(id: string, opts: ResumeOnNode = {}): Promise<NodeSandbox> {
    return this.pauses.resume(id, opts);
  }

  snapshot(id: string, req: SnapshotSandboxOnNode): Promise<LayerOnNode> {
    return this.capture.snapshot(id, req);
  }

  exec(id: string, req: ExecRequest, onOutput?: ExecOutput) {
    return this.execs.exec(id, req, onOutput);
  }

  metrics(id: string, opts: { waitForCpu?: boolean } = {}): Promise<SandboxMetrics> {
    return this.metricsReader.metrics(id, opts);
  }

  /** The sandboxes running now (not paused, not the warm pool's): what the metrics sampler reads. */
  runningIds(): string[] {
    return this.table.entries().filter(([, i]) => i.record.phase === 'running').map(([id]) => id);
  }

  isRunning(id: string): boolean {
    return this.table.has(id) && this.table.find(id).record.phase === 'running';
  }

  /** The sandbox's own log (its console file), running or paused. */
  async logs(id: string, q: SandboxLogSelection): Promise<SandboxLogs> {
    const inst = this.table.find(id);
    return { logs: await readConsoleLog(this.table.driverOf(inst).consolePath(inst.ref), q) };
  }

  /** Sandboxes on the artifact, and creates on it under way: it is not deleted while any are. */
  artifactUsers(artifactId: string): number {
    return this.table.all().filter((i) => i.record.artifactId === artifactId).length + this.creator.creatingOn(artifactId);
  }

  usage() {
    const all = this.table.all();
    return {
      running: all.filter((i) => i.record.phase === 'running').length,
      paused: all.filter((i) => i.record.phase === 'paused').length,
      usedMemoryMB: usedMemoryMB(this.table.memoryHolders(), this.d.releaseRatio),
    };
  }

  instanceOf(sandboxId: string): Instance {
    return this.table.find(sandboxId);
  }

  /**
   * Cuts console files past their cap (console-file.ts capConsoleFile); one failure does not stop
   * the rest. Warm sandboxes' too: they run their template's files before any hand-out.
   */
  async capConsoles(): Promise<void> {
    for (const inst of [...this.table.all(), ...this.pool.instances()]) {
      await capConsoleFile(this.table.driverOf(inst).consolePath(inst.ref)).catch((err: Error) => this.d.logger.warn({ sandboxId: inst.record.sandboxId, err: err.message }, 'console log not cut; tried again at the next sweep'));
    }
  }

  /** Releases what sandboxes whose processes died held (liveness.ts). */
  sweepDead(): Promise<void> {
    return this.liveness.sweep();
  }

  ended(): EndedSandbox[] {
    return this.table.endedList();
  }

  /** What heartbeats carry to the master (repeated for a while, so one lost beat loses nothing). */
  recentlyEnded(withinMs = 120_000): EndedSandbox[] {
    const since = Date.now() - withinMs;
    return this.ended().filter((e) => Date.parse(e.endedAt) >= since);
  }

  async close(opts: { destroySandboxes?: boolean } = {}): Promise<void> {
    this.closing = true;
    await this.pool.close();
    await this.table.locks.idle();
    if (opts.destroySandboxes) {
      await Promise.all(this.table.ids().map((id) => this.delete(id).catch((err) => this.d.logger.error({ err, sandboxId: id }, 'destroy on close failed'))));
    }
  }

  get count() { return this.table.size + this.pool.count(); }
}
