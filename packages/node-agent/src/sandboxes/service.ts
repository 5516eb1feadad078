import { SvcError, badRequest, conflict, notFound, type Logger } from '@svc/common';
import { admissionRefusal, EXEC_OUTPUT_LIMIT, type ArtifactOnNode, type CreateSandboxOnNode, type ExecOnNode, type ExecResultOnNode, type NetworkUpdateOnNode, type EndedSandbox, type EnsureArtifact, type LayerOnNode, type NodeSandbox, type PauseOnNode, type ResumeOnNode, type SandboxMetrics } from '@svc/contracts/node-agent';
import type { ArtifactStore } from '../artifacts/artifact-store.ts';
import type { LayerStore } from '../artifacts/layer-store.ts';
import type { ExecInputs } from '../artifacts/exec-input.ts';
import { CommandError } from '../host/exec.ts';
import { ENVD_PORT, envdHealthy, envdInit, waitForEnvd } from '../envd-client.ts';
import { DEFAULT_POLICY, normalizePolicy, samePolicy, type EgressPolicy } from '../network/egress-policy.ts';
import type { Firewall } from '../network/firewall.ts';
import type { HostLearner } from '../network/host-learner.ts';
import type { ExecOptions, ExecOutput, InstanceResources, RuntimeDriver } from '../runtime/driver.ts';
import type { RuntimeDrivers } from '../runtime/drivers.ts';
import { dropOutboundConnections } from '../network/drop-outbound.ts';
import { checkResumeAdmission, usedMemoryMB } from './admission.ts';
import type { MemoryAdmission } from './memory-admission.ts';
import type { Instance, InstanceLauncher } from './instances.ts';
import { KeyedMutex } from './keyed-mutex.ts';
import type { RecordStore } from './record.ts';
import { WarmPool } from './warm-pool.ts';
import { SANDBOX_SUDO } from '../runtime/runtime-bundle.ts';
import type { LayerContents, RuntimeKind, SandboxLogs, SnapshotSandboxOnNode } from '@svc/contracts/node-agent';
import type { SandboxLogSelection } from '@svc/contracts/sandbox-logs';
import { readConsoleLog } from './console-log.ts';
import type { ExtInfo, VolumeMountOnNode, VolumeRefFlip } from '@svc/contracts/volumes';
import type { AttachedVolume, VolumeAttachments } from '../volumes/attachments.ts';

export interface SandboxServiceDeps {
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

const GONE_REMEMBERED = 1000;

/** The node's sandboxes and the operations of api.ts on them, one lock per sandbox id. */
/** A user's uid, gid and home, one a line, with nothing but `id` and the shell (busybox images too). */
const WHO_IS = 'id -u "$1" && id -g "$1" && while IFS=: read -r n _ _ _ _ h _; do [ "$n" = "$1" ] && echo "$h"; done < /etc/passwd';

export class SandboxService {
  private readonly sandboxes = new Map<string, Instance>();
  /** Users of each sandbox's image looked up by exec (whoIs), dropped with the instance. */
  private readonly users = new WeakMap<Instance, Map<string, { uid: string; gid: string; home: string }>>();
  /** Sandboxes whose processes died, so a later GET can say so instead of a bare 404 (and the master learns why). */
  private readonly gone = new Map<string, EndedSandbox>();
  /** Creates under way per artifact: an artifact is not deleted under them. */
  private readonly creating = new Map<string, number>();
  private readonly cpuSamples = new Map<string, { ns: number; at: number }>();
  private readonly locks = new KeyedMutex();
  readonly pool: WarmPool;
  private closing = false;
  /** The node's real-memory admission (absent: creates are admitted by the master alone). */
  private memory?: MemoryAdmission;

  constructor(private readonly d: SandboxServiceDeps) {
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
        // Only envd runs in a warm sandbox until it is handed out, so it can wait with the
        // policy most creates ask for: then the hand-out needs no firewall change at all.
        // envd runs one command at boot, so that a user's first is not the first (packages/envd/src/warm-up.ts).
        role: 'warm', templateId: '', artifactId, resources: d.warmShape, env: { SVC_ENVD_WARMUP: '1' }, policy: DEFAULT_POLICY, metadata: {}, runtime: d.warmRuntime,
        signal: AbortSignal.any([signal, AbortSignal.timeout(60_000)]),
      }),
      destroy: (inst) => d.launcher.teardown(inst),
    });
  }

  /** The token an instance's envd was given at /init (the microvm driver's way in); none before /init. */
  envdToken(instanceId: string): string | undefined {
    return [...this.sandboxes.values(), ...this.pool.instances()].find((i) => i.record.instanceId === instanceId)?.record.envdAccessToken;
  }

  /** Instances whose processes run now: handed-out sandboxes not paused, and warm ones. */
  runningInstances(): Instance[] {
    return [...[...this.sandboxes.values()].filter((i) => i.record.phase === 'running'), ...this.pool.instances()];
  }

  useMemoryAdmission(memory: MemoryAdmission): void {
    this.memory = memory;
  }

  adopt(instances: Instance[]) {
    for (const inst of instances) {
      if (!inst.record.sandboxId) continue;
      this.sandboxes.set(inst.record.sandboxId, inst);
      if (inst.record.volumes?.length && !inst.record.volumesDetached) this.d.volumes.adopt(inst.record.sandboxId, inst.record.volumes);
    }
  }

  list(): NodeSandbox[] {
    return [...this.sandboxes.values()].filter((i) => i.record.phase !== 'creating').map(view);
  }

  get(id: string): NodeSandbox {
    return view(this.find(id));
  }

  async create(req: CreateSandboxOnNode): Promise<NodeSandbox> {
    if (this.closing) throw new SvcError(503, 'node agent is shutting down');
    const { policy, ignored } = normalizePolicy({ allowInternetAccess: req.allowInternetAccess, ...req.network });
    if (ignored.length) this.d.logger.info({ sandboxId: req.sandboxId, ignored }, 'network entries this node cannot enforce at layer 3 were left out');
    await this.learnHosts(policy);
    const artifactId = req.artifact.artifactId;
    // A memory layer is a saved machine, which only the microvm runtime restores.
    const runtime = req.runtime ?? (req.layer?.contents === 'memory' && this.d.drivers.find('microvm') ? 'microvm' : undefined);
    const driver = this.d.drivers.forCreate(runtime);
    return this.locks.run(req.sandboxId, async () => {
      if (this.sandboxes.has(req.sandboxId)) throw conflict(`sandbox ${req.sandboxId} already exists on this node`);
      const admitted = await this.memory?.admit(req.memoryMB);
      this.creating.set(artifactId, (this.creating.get(artifactId) ?? 0) + 1);
      const signal = AbortSignal.timeout(req.timeoutMs);
      const started = Date.now();
      let flips: VolumeRefFlip[] = [];
      try {
        await this.d.artifacts.ensure(artifactId, req.artifact);
        const resources = { cpuCount: req.cpuCount, memoryMB: req.memoryMB, diskSizeMB: req.diskSizeMB };
        // A warm sandbox booted with an empty writable layer and no volumes: one from a captured
        // layer, or with volumes (bound at boot), starts cold.
        let inst = req.layer || req.volumes?.length || driver.kind !== this.d.warmRuntime ? undefined : await this.fromWarmPool(req, resources, policy);
        if (!inst) {
          const launch = async (layerArchive?: string, layerContents?: LayerContents) => {
            const volumes = await this.d.volumes.attach(sandboxHolder(req.sandboxId), req.volumes ?? []);
            try {
              const launched = await this.d.launcher.launch({
                role: 'sandbox', sandboxId: req.sandboxId, templateId: req.templateId, artifactId, resources, env: {},
                policy, metadata: req.metadata, defaults: { defaultUser: req.defaultUser, defaultWorkdir: req.defaultWorkdir }, signal, runtime: driver.kind,
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
          inst = layerRef
            ? await this.d.layers.reading(layerRef.layerId, (archive, layer) => {
              if (layer.artifactId !== artifactId) throw conflict(`layer ${layerRef.layerId} lies over artifact ${layer.artifactId}, not ${artifactId}`);
              return launch(archive, layer.contents);
            })
            : await launch();
          const launched = inst;
          await personalise(launched, req).catch(async (err: Error) => {
            await this.d.launcher.teardown(launched).catch((e: Error) => this.d.logger.error({ instanceId: launched.record.instanceId, err: e.message }, 'teardown after a failed /init left something behind'));
            await this.d.volumes.detach(sandboxHolder(req.sandboxId), (launched.record.volumes ?? []).map((v) => v.volumeId));
            throw err;
          });
        }
        this.sandboxes.set(req.sandboxId, inst);
        this.gone.delete(req.sandboxId);
        this.d.logger.info({ sandboxId: req.sandboxId, ms: Date.now() - started, fromWarmPool: !!inst.record.fromWarmPool }, 'sandbox created');
        return withFlips(view(inst), flips);
      } catch (err) {
        throw createError(req, err, signal);
      } finally {
        admitted?.();
        this.creating.set(artifactId, (this.creating.get(artifactId) ?? 1) - 1);
      }
    });
  }

  /** Destroys a sandbox (running or paused); the answer carries the volume count flips. */
  async delete(id: string): Promise<ExtInfo> {
    return this.locks.run(id, async () => {
      const inst = this.find(id);
      const attached = attachedVolumeIds(inst);
      await this.d.launcher.teardown(inst).catch((err) => { throw wrap(`sandbox ${id}: destroy failed`, err); });
      this.sandboxes.delete(id);
      this.cpuSamples.delete(inst.record.instanceId);
      const flips = await this.d.volumes.detach(sandboxHolder(id), attached);
      this.d.logger.info({ sandboxId: id, paused: inst.record.phase === 'paused' }, 'sandbox destroyed');
      return flips.length ? { volumeRefFlips: flips } : {};
    });
  }

  /** Replaces a running sandbox's egress policy (its firewall chain) with the one given. */
  async updateNetwork(id: string, update: NetworkUpdateOnNode): Promise<NodeSandbox> {
    const { policy, ignored } = normalizePolicy({ allowInternetAccess: update.allowInternetAccess, ...update.network });
    await this.learnHosts(policy);
    return this.locks.run(id, async () => {
      const inst = this.find(id);
      if (inst.record.phase !== 'running') throw conflict(`sandbox ${id} is paused; resume it before changing its network`);
      await this.d.firewall.update(inst.record.instanceId, policy);
      inst.record.policy = policy;
      await this.d.records.save(inst.record);
      if (ignored.length) this.d.logger.info({ sandboxId: id, ignored }, 'network entries this node cannot enforce at layer 3 were left out');
      return view(inst);
    });
  }

  private async learnHosts(policy: EgressPolicy): Promise<void> {
    if (this.d.hosts && policy.allowOutHosts?.length) policy.learned = await this.d.hosts.learn(policy.allowOutHosts);
  }

  /** Learns allowOut's host names again; a running sandbox whose addresses changed gets them at once. */
  async relearnHosts(): Promise<void> {
    for (const inst of [...this.sandboxes.values()]) {
      if (!inst.record.policy.allowOutHosts?.length || inst.record.phase !== 'running' || !inst.record.sandboxId) continue;
      const next = { ...inst.record.policy };
      await this.learnHosts(next);
      if (samePolicy(next, inst.record.policy)) continue;
      await this.locks.run(inst.record.sandboxId, async () => {
        if (inst.record.phase !== 'running') return;
        await this.d.firewall.update(inst.record.instanceId, next);
        inst.record.policy = next;
        await this.d.records.save(inst.record);
      });
    }
  }

  async pause(id: string, opts: PauseOnNode = {}): Promise<NodeSandbox> {
    return this.locks.run(id, async () => {
      const inst = this.find(id);
      if (inst.record.phase === 'paused') throw conflict(`sandbox ${id} is already paused`);
      const blocked = opts.memory === false ? undefined : await this.driverOf(inst).memoryPauseBlocked?.(inst.ref);
      if (blocked) this.d.logger.info({ sandboxId: id, reason: blocked }, 'paused without its memory');
      if (opts.memory === false || blocked) {
        const flips = await this.stopKeepingFiles(inst);
        return withFlips(view(inst), flips);
      }
      const res = await this.driverOf(inst).pause(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: pause failed`, err); });
      await dropOutboundConnections(inst.ref.netnsPath, inst.record.hostAddress).catch((err: Error) =>
        this.d.logger.error({ sandboxId: id, err: err.message }, 'pause: the sandbox\'s outbound connections could not be dropped; they may go on after the resume'));
      Object.assign(inst.record, { phase: 'paused', pauseKind: res.kind, pausedAt: new Date().toISOString(), snapshotBytes: res.snapshotBytes });
      await this.d.records.save(inst.record);
      return view(inst);
    });
  }

  /**
   * A filesystem pause: the processes end and their memory is freed; the writable layer stays.
   * Its volumes are detached (the counts move at pause time) and attached again by the boot
   * that resumes it. A frozen sandbox keeps them: its processes still hold the mounts.
   */
  private async stopKeepingFiles(inst: Instance): Promise<VolumeRefFlip[]> {
    const id = inst.record.sandboxId!;
    const driver = this.driverOf(inst);
    if (!driver.stop) throw new SvcError(400, `the ${driver.kind} runtime cannot pause without memory here; pause with memory kept`);
    await driver.stop(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: filesystem pause failed`, err); });
    const attached = attachedVolumeIds(inst);
    Object.assign(inst.record, { phase: 'paused', pauseKind: 'filesystem', pausedAt: new Date().toISOString(), snapshotBytes: undefined, ...(attached.length ? { volumesDetached: true } : {}) });
    await this.d.records.save(inst.record);
    return this.d.volumes.detach(sandboxHolder(id), attached);
  }

  /**
   * Captures a running sandbox as a new layer on this node: its whole machine where the runtime
   * can save one (microvm, unless `memory: false`), else its writable layer with its kernel's
   * buffers flushed (`sync` inside); the sandbox is paused while it is read, then resumed.
   * A paused sandbox is captured as it lies (its pause package, docs/cluster.md): a saved
   * machine whole, a filesystem pause's files; a frozen one cannot be (409).
   */
  async snapshot(id: string, req: SnapshotSandboxOnNode): Promise<LayerOnNode> {
    const { layerId } = req;
    return this.locks.run(id, async () => {
      const inst = this.find(id);
      if (this.d.layers.get(layerId)) throw conflict(`layer ${layerId} already exists on this node`);
      if (inst.record.phase !== 'running') return this.capturePaused(inst, layerId);
      const driver = this.driverOf(inst);
      const blocked = await driver.memoryPauseBlocked?.(inst.ref);
      if (blocked) throw conflict(`sandbox ${id} cannot be captured: ${blocked}`);
      const used = (await driver.stats(inst.ref).catch(() => undefined))?.diskUsedBytes;
      const free = await this.d.layers.freeBytes();
      if (used !== undefined && used > free) {
        throw new SvcError(507, `sandbox ${id} holds ${used} bytes of changed files, more than the ${free} bytes free where this node keeps snapshots`);
      }
      // The whole machine where the runtime can save it (its memory holds what the files lack);
      // the files alone otherwise, flushed from the sandbox's kernel first.
      const captureMachine = req.memory !== false ? driver.captureMachine?.bind(driver) : undefined;
      if (!captureMachine) {
        const flushed = await driver.exec(inst.ref, [SANDBOX_SUDO, '--sync'], { timeoutMs: 60_000 });
        if (flushed.code !== 0) throw new SvcError(500, `sandbox ${id}: sync before the snapshot failed: ${flushed.stderr.trim() || `exit ${flushed.code}`}`);
      }
      await driver.pause(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: pause for the snapshot failed`, err); });
      try {
        return await this.d.layers.add(layerId, {
          artifactId: inst.record.artifactId, sandboxId: id, contents: captureMachine ? 'memory' : 'filesystem', createdAt: new Date().toISOString(),
        }, (path) => (captureMachine ? captureMachine(inst.ref, path) : driver.captureLayer(inst.ref, path)));
      } finally {
        await driver.resume(inst.ref).catch((err: Error) => {
          this.d.logger.error({ sandboxId: id, err: err.message }, 'sandbox could not be resumed after its snapshot');
        });
      }
    });
  }

  /** A paused sandbox's state as a layer, read without waking it (the caller holds its lock). */
  private async capturePaused(inst: Instance, layerId: string): Promise<LayerOnNode> {
    const id = inst.record.sandboxId!;
    const driver = this.driverOf(inst);
    const meta = { artifactId: inst.record.artifactId, sandboxId: id, createdAt: new Date().toISOString() };
    if (inst.record.pauseKind === 'snapshot' && driver.captureMachine) {
      return this.d.layers.add(layerId, { ...meta, contents: 'memory' }, (path) => driver.captureMachine!(inst.ref, path));
    }
    if (inst.record.pauseKind === 'filesystem') {
      return this.d.layers.add(layerId, { ...meta, contents: 'filesystem' }, (path) => driver.captureLayer(inst.ref, path));
    }
    throw conflict(`sandbox ${id} is paused by freezing its processes, which cannot be captured; resume it first, or pause it without its memory`);
  }

  listLayers(): LayerOnNode[] {
    return this.d.layers.list();
  }

  layerArchive(id: string) {
    return this.d.layers.openArchive(id);
  }

  deleteLayer(id: string): Promise<void> {
    return this.d.layers.remove(id);
  }

  async resume(id: string, opts: ResumeOnNode = {}): Promise<NodeSandbox> {
    return this.locks.run(id, async () => {
      const inst = this.find(id);
      if (inst.record.phase !== 'paused') return view(inst);
      checkResumeAdmission({ state: 'paused', memoryMB: inst.record.memoryMB }, this.memoryHolders(), this.d.memoryQuotaMB ?? this.d.capacity.memoryMB, this.d.releaseRatio);
      if (inst.record.pauseKind === 'filesystem' || opts.memory === false) return this.rebootFromFiles(inst, opts);
      await this.driverOf(inst).resume(inst.ref).catch((err) => { throw wrap(`sandbox ${id}: resume failed`, err); });
      Object.assign(inst.record, { phase: 'running', pauseKind: undefined, pausedAt: undefined, snapshotBytes: undefined });
      await this.d.records.save(inst.record);
      await waitForEnvd(inst.record.address, AbortSignal.timeout(10_000)).catch(() => {
        this.d.logger.warn({ sandboxId: id }, 'envd did not answer within 10 s of resume');
      });
      return view(inst);
    });
  }

  /**
   * Boots a sandbox again from its files: one paused without its memory, or a frozen one whose
   * memory the caller drops (E2B's connect with memory false). It gets its identity anew (envd
   * /init with the environment and token the master sends); a failed boot leaves it paused.
   */
  private async rebootFromFiles(inst: Instance, opts: ResumeOnNode): Promise<NodeSandbox> {
    const id = inst.record.sandboxId!;
    if (!opts.envVars) throw badRequest(`sandbox ${id} boots again from its files: its envVars (and envdAccessToken when it is secure) are required`);
    const flips = inst.record.pauseKind !== 'filesystem' ? await this.stopKeepingFiles(inst) : [];
    flips.push(...await this.reattach(inst, opts.volumes));
    await this.d.launcher.reboot(inst, AbortSignal.timeout(60_000)).catch(async (err) => {
      flips.push(...await this.detachForPause(inst));
      throw wrap(`sandbox ${id}: boot from its files failed`, err);
    });
    const identity = {
      sandboxId: id, templateId: inst.record.templateId, envVars: opts.envVars, envdAccessToken: opts.envdAccessToken,
      defaultUser: inst.record.defaultUser, defaultWorkdir: inst.record.defaultWorkdir,
    };
    await personalise(inst, identity).catch(async (err) => {
      await this.driverOf(inst).stop!(inst.ref).catch((e: Error) => this.d.logger.error({ sandboxId: id, err: e.message }, 'stop after a failed /init left the sandbox running'));
      await this.detachForPause(inst);
      throw wrap(`sandbox ${id}: envd /init after the boot failed`, err);
    });
    Object.assign(inst.record, { phase: 'running', pauseKind: undefined, pausedAt: undefined, snapshotBytes: undefined, startedAt: new Date().toISOString() });
    await this.d.records.save(inst.record);
    return withFlips(view(inst), flips);
  }

  /**
   * Attaches a stopped sandbox's volumes again before its boot: the master's current records
   * when it sends them (re-validated there), else the ones the node kept.
   */
  private async reattach(inst: Instance, current: VolumeMountOnNode[] | undefined): Promise<VolumeRefFlip[]> {
    const kept = inst.record.volumes ?? [];
    if (!inst.record.volumesDetached || kept.length === 0) return [];
    const mounts = current ?? kept.map(({ hostPath: _h, metadata: _m, ...m }) => m);
    const { attached, flips } = await this.d.volumes.attach(sandboxHolder(inst.record.sandboxId!), mounts);
    Object.assign(inst.record, { volumes: attached, volumesDetached: false });
    await this.d.records.save(inst.record);
    return flips;
  }

  /** After a failed boot the sandbox stays paused without its volumes attached. */
  private async detachForPause(inst: Instance): Promise<VolumeRefFlip[]> {
    const attached = attachedVolumeIds(inst);
    if (attached.length === 0) return [];
    inst.record.volumesDetached = true;
    await this.d.records.save(inst.record);
    return this.d.volumes.detach(sandboxHolder(inst.record.sandboxId!), attached);
  }

  /** The sandbox's own log (its console file), running or paused. */
  async logs(id: string, q: SandboxLogSelection): Promise<SandboxLogs> {
    const inst = this.find(id);
    return { logs: await readConsoleLog(this.driverOf(inst).consolePath(inst.ref), q) };
  }

  /**
   * Runs a shell command in a running sandbox to its end (the template builder's steps): as root
   * through runsc, or as the user named, whose uid, gid and home the image's own passwd gives.
   */
  async exec(id: string, req: Required<Omit<ExecOnNode, 'stdin' | 'cwd'>> & Pick<ExecOnNode, 'stdin' | 'cwd'>, onOutput?: ExecOutput): Promise<ExecResultOnNode> {
    const inst = this.find(id);
    if (inst.record.phase !== 'running') throw conflict(`sandbox ${id} is paused; resume it before running commands in it`);
    const env = { ...req.envVars };
    let user: ExecOptions['user'];
    let home = '/';
    if (req.user !== 'root') {
      const who = await this.whoIs(inst, req.user);
      user = { name: req.user, uid: who.uid, gid: who.gid };
      home = who.home;
      env.HOME ??= home;
      env.USER ??= req.user;
    }
    // Without a cwd a command starts in its user's home, as envd starts one (root's is /).
    const cwd = req.cwd ?? home;
    const run = (inputFile?: string) => this.driverOf(inst).exec(inst.ref, ['/bin/sh', '-c', req.command], { timeoutMs: req.timeoutMs, user, cwd, env, inputFile, onOutput });
    const r = req.stdin ? await this.d.execInputs.with(req.stdin, run) : await run();
    const killed = r.stderr.endsWith(`(killed after ${req.timeoutMs} ms)`);
    const tail = (text: string) => (Buffer.byteLength(text) > EXEC_OUTPUT_LIMIT ? Buffer.from(text).subarray(-EXEC_OUTPUT_LIMIT).toString('utf8') : text);
    const truncated = Buffer.byteLength(r.stdout) > EXEC_OUTPUT_LIMIT || Buffer.byteLength(r.stderr) > EXEC_OUTPUT_LIMIT;
    return { exitCode: killed ? 124 : r.code, stdout: tail(r.stdout), stderr: tail(r.stderr), ...(truncated ? { truncated } : {}) };
  }

  /**
   * A user's uid, gid and home in the sandbox's image, looked up once per sandbox (each lookup is
   * a runsc exec, about 100 ms under ptrace): a build's steps run as the same user again and again.
   * Only found users are kept, so a user a later step makes is found then.
   */
  private async whoIs(inst: Instance, user: string): Promise<{ uid: string; gid: string; home: string }> {
    let users = this.users.get(inst);
    const known = users?.get(user);
    if (known) return known;
    const who = await this.driverOf(inst).exec(inst.ref, ['/bin/sh', '-c', WHO_IS, 'whois', user]);
    const [uid, gid, dir] = who.stdout.trim().split('\n');
    if (who.code !== 0 || !/^\d+$/.test(uid ?? '') || !/^\d+$/.test(gid ?? '')) throw badRequest(`user ${user} does not exist in sandbox ${inst.record.sandboxId}`);
    const found = { uid: uid!, gid: gid!, home: dir || '/' };
    if (!users) { users = new Map(); this.users.set(inst, users); }
    users.set(user, found);
    return found;
  }

  async metrics(id: string): Promise<SandboxMetrics> {
    const inst = this.find(id);
    const key = inst.record.instanceId;
    const read = () => this.driverOf(inst).stats(inst.ref).catch((err) => {
      this.find(id); // gone meanwhile: 404
      // Its cgroup went away under the read (the sandbox is ending): nothing to measure now, not an internal error.
      if (err instanceof SvcError) throw err;
      throw new SvcError(503, `sandbox ${id}: metrics unavailable: ${(err as Error).message}`);
    });
    let stats = await read();
    let prev = this.cpuSamples.get(key);
    if (!prev || Date.now() - prev.at > 60_000) {
      // No recent sample to measure against: take a short one.
      prev = { ns: stats.cpuUsageNs, at: Date.now() };
      await new Promise((r) => setTimeout(r, 100));
      stats = await read();
    }
    const now = Date.now();
    const cpuPct = now > prev.at ? ((stats.cpuUsageNs - prev.ns) / 1e6 / (now - prev.at) / inst.record.cpuCount) * 100 : 0;
    this.cpuSamples.set(key, { ns: stats.cpuUsageNs, at: now });
    return {
      timestampUnix: Math.floor(now / 1000),
      cpuCount: inst.record.cpuCount,
      cpuUsedPct: Math.round(Math.min(100, Math.max(0, cpuPct)) * 100) / 100,
      memUsed: stats.memUsedBytes,
      memTotal: inst.record.memoryMB * 1024 * 1024,
      memCache: stats.memCacheBytes,
      diskUsed: stats.diskUsedBytes,
      diskTotal: inst.record.diskSizeMB * 1024 * 1024,
    };
  }

  async ensureArtifact(id: string, req: EnsureArtifact): Promise<ArtifactOnNode> {
    const a = await this.d.artifacts.ensure(id, req);
    if (this.d.drivers.all().some((d) => d.rootfsInput === 'directory')) await this.d.artifacts.mount(id);
    this.pool.fill(id);
    return a;
  }

  listArtifacts(): ArtifactOnNode[] {
    return this.d.artifacts.list();
  }

  async deleteArtifact(id: string): Promise<void> {
    const users = [...this.sandboxes.values()].filter((i) => i.record.artifactId === id).length + (this.creating.get(id) ?? 0);
    if (users > 0) throw conflict(`artifact ${id} is used by ${users} sandbox(es) on this node`);
    await this.pool.drain(id);
    await this.d.artifacts.remove(id);
  }

  usage() {
    const holders = this.memoryHolders();
    const all = [...this.sandboxes.values()];
    return {
      running: all.filter((i) => i.record.phase === 'running').length,
      paused: all.filter((i) => i.record.phase === 'paused').length,
      usedMemoryMB: usedMemoryMB(holders, this.d.releaseRatio),
    };
  }

  artifactsInUse(): Set<string> {
    return new Set([...this.sandboxes.values(), ...this.pool.instances()].map((i) => i.record.artifactId));
  }

  instanceOf(sandboxId: string): Instance {
    return this.find(sandboxId);
  }

  /**
   * Finds sandboxes whose processes died (envd silent and the runtime says stopped) and
   * releases what they held. Paused sandboxes are not probed: they cannot answer.
   */
  async sweepDead(): Promise<void> {
    const probe = async (inst: Instance) => {
      if (inst.record.phase !== 'running') return false;
      const driver = this.driverOf(inst);
      const alive = driver.processesAlive ? await driver.processesAlive(inst.ref) : await envdHealthy(inst.record.address, 1_000);
      if (alive) return false;
      const status = await driver.status(inst.ref);
      return status === 'stopped' || status === 'missing';
    };
    for (const inst of this.pool.instances()) {
      if (await probe(inst)) {
        this.pool.discard(inst);
        await this.d.launcher.teardown(inst).catch((err) => this.d.logger.warn({ err }, 'dead warm sandbox cleanup failed'));
      }
    }
    for (const [id, inst] of [...this.sandboxes]) {
      if (!(await probe(inst))) continue;
      await this.locks.run(id, async () => {
        if (this.sandboxes.get(id) !== inst || !(await probe(inst))) return;
        const cause = await this.driverOf(inst).endCause?.(inst.ref).catch((err) => {
          this.d.logger.warn({ err, sandboxId: id }, 'could not tell why the sandbox ended');
          return undefined;
        });
        const ended: EndedSandbox = cause === 'oom'
          ? { sandboxId: id, reason: 'oom', message: `it ran out of memory (more than its ${inst.record.memoryMB} MB plus the runtime's headroom) and the host stopped it`, endedAt: new Date().toISOString() }
          : { sandboxId: id, reason: 'exited', message: 'its processes exited', endedAt: new Date().toISOString() };
        this.d.logger.warn({ sandboxId: id, reason: ended.reason }, 'sandbox processes exited; releasing its resources');
        const attached = attachedVolumeIds(inst);
        await this.d.launcher.teardown(inst);
        this.sandboxes.delete(id);
        // The master learns of the end from the heartbeat, and recounts volumes from the nodes' lists.
        await this.d.volumes.detach(sandboxHolder(id), attached);
        this.gone.set(id, ended);
        if (this.gone.size > GONE_REMEMBERED) this.gone.delete(this.gone.keys().next().value!);
      }).catch((err) => this.d.logger.error({ err, sandboxId: id }, 'dead sandbox cleanup failed'));
    }
  }

  ended(): EndedSandbox[] {
    return [...this.gone.values()].reverse();
  }

  /** What heartbeats carry to the master (repeated for a while, so one lost beat loses nothing). */
  recentlyEnded(withinMs = 120_000): EndedSandbox[] {
    const since = Date.now() - withinMs;
    return this.ended().filter((e) => Date.parse(e.endedAt) >= since);
  }

  async close(opts: { destroySandboxes?: boolean } = {}): Promise<void> {
    this.closing = true;
    await this.pool.close();
    await this.locks.idle();
    if (opts.destroySandboxes) {
      await Promise.all([...this.sandboxes.keys()].map((id) => this.delete(id).catch((err) => this.d.logger.error({ err, sandboxId: id }, 'destroy on close failed'))));
    }
  }

  get count() { return this.sandboxes.size + this.pool.count(); }

  private async fromWarmPool(req: CreateSandboxOnNode, resources: InstanceResources, policy: EgressPolicy): Promise<Instance | undefined> {
    const inst = await this.pool.take(req.artifact.artifactId, resources);
    if (!inst) return undefined;
    try {
      await Promise.all([
        samePolicy(inst.record.policy, policy) ? undefined : this.d.firewall.update(inst.record.instanceId, policy),
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

  /** Sandboxes that hold memory: running or frozen (one paused without its memory holds none). */
  private memoryHolders() {
    return [...this.sandboxes.values()]
      .filter((i) => i.record.phase === 'running' || (i.record.phase === 'paused' && i.record.pauseKind !== 'filesystem'))
      .map((i) => ({ state: i.record.phase as 'running' | 'paused', memoryMB: i.record.memoryMB }));
  }

  /** The driver that runs the instance (its record's runtime). */
  private driverOf(inst: Instance): RuntimeDriver {
    return this.d.drivers.of(inst.record);
  }

  private find(id: string): Instance {
    const inst = this.sandboxes.get(id);
    if (!inst || inst.record.phase === 'creating') {
      const why = this.gone.get(id)?.message;
      throw notFound(why ? `sandbox ${id} is gone: ${why}` : `sandbox ${id} not found on this node`);
    }
    return inst;
  }
}

const sandboxHolder = (sandboxId: string) => ({ id: sandboxId, kind: 'sandbox' as const });

/** The volumes a sandbox holds attached now (none after a filesystem pause). */
function attachedVolumeIds(inst: Instance): string[] {
  return inst.record.volumesDetached ? [] : (inst.record.volumes ?? []).map((v: AttachedVolume) => v.volumeId);
}

function withFlips(s: NodeSandbox, flips: VolumeRefFlip[]): NodeSandbox {
  return flips.length ? { ...s, extInfo: { volumeRefFlips: flips } } : s;
}

function view(inst: Instance): NodeSandbox {
  const r = inst.record;
  return {
    sandboxId: r.sandboxId!, templateId: r.templateId, state: r.phase === 'paused' ? 'paused' : 'running',
    address: r.address, envdPort: ENVD_PORT, envdVersion: r.envdVersion, runtime: r.runtime,
    ...(r.phase === 'paused' && r.pauseKind ? { pauseKind: r.pauseKind } : {}),
    ...(r.snapshotBytes !== undefined ? { snapshotBytes: r.snapshotBytes } : {}),
    cpuCount: r.cpuCount, memoryMB: r.memoryMB, startedAt: r.startedAt,
    ...(r.fromWarmPool ? { fromWarmPool: true } : {}),
  };
}

function wrap(prefix: string, err: unknown): SvcError {
  if (err instanceof SvcError) return err;
  return new SvcError(500, `${prefix}: ${(err as Error).message}`);
}

function createError(req: CreateSandboxOnNode, err: unknown, signal: AbortSignal): SvcError {
  if (signal.aborted) {
    // What the launch was waiting for when time ran out (envd's last answer, the console) if it knows.
    const detail = err instanceof SvcError && err.status === 504 ? `: ${err.message}` : '';
    return new SvcError(504, `sandbox ${req.sandboxId}: create did not finish within ${req.timeoutMs} ms${detail}`);
  }
  if (err instanceof SvcError) return err;
  if (err instanceof CommandError) return new SvcError(500, `sandbox ${req.sandboxId}: runtime failed: ${err.message}`);
  return new SvcError(500, `sandbox ${req.sandboxId}: create failed: ${(err as Error).message}`);
}

/**
 * The one way a sandbox gets its identity, started cold, taken from the warm pool or booted
 * again from its files: envd's POST /init with the sandbox's env vars (and E2B's own) and access
 * token (docs/design.md, "Components").
 */
function personalise(inst: Instance, id: Pick<CreateSandboxOnNode, 'sandboxId' | 'templateId' | 'envVars' | 'envdAccessToken' | 'defaultUser' | 'defaultWorkdir'>): Promise<void> {
  const envVars = { ...id.envVars, E2B_SANDBOX: 'true', E2B_SANDBOX_ID: id.sandboxId, E2B_TEMPLATE_ID: id.templateId };
  // Kept with the record (0600, the agent's state dir): the microvm driver reaches its guest through envd alone.
  inst.record.envdAccessToken = id.envdAccessToken;
  return envdInit(inst.record.address, {
    envVars, accessToken: id.envdAccessToken, timestamp: new Date().toISOString(),
    ...(id.defaultUser ? { defaultUser: id.defaultUser } : {}), ...(id.defaultWorkdir ? { defaultWorkdir: id.defaultWorkdir } : {}),
  });
}
