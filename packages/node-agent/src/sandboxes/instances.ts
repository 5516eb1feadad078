import { rm } from 'node:fs/promises';
import { SvcError, type Logger } from '@svc/common';
import type { ArtifactStore } from '../artifacts/artifact-store.ts';
import { waitForEnvd } from '../envd-client.ts';
import { ResourceNames } from '../names.ts';
import type { AddressPool } from '../network/address-pool.ts';
import type { EgressPolicy } from '../network/egress-policy.ts';
import type { Firewall } from '../network/firewall.ts';
import { forgetConnections } from '../network/conntrack.ts';
import { createSandboxLink, destroySandboxLink, netnsPath } from '../network/netns.ts';
import type { InstanceRef, InstanceResources, InstanceSpec } from '../runtime/driver.ts';
import type { RuntimeDrivers } from '../runtime/drivers.ts';
import type { LayerContents, RuntimeKind } from '@svc/contracts/node-agent';
import type { RuntimeBundle } from '../runtime/runtime-bundle.ts';
import type { InstanceRecord, RecordStore } from './record.ts';
import type { AttachedVolume } from '../volumes/attachments.ts';

/** A runtime instance the agent holds: a user sandbox or a warm one. */
export interface Instance {
  record: InstanceRecord;
  ref: InstanceRef;
}

export interface LaunchRequest {
  role: InstanceRecord['role'];
  sandboxId?: string;
  templateId: string;
  artifactId: string;
  resources: InstanceResources;
  env: Record<string, string>;
  policy: EgressPolicy;
  metadata: Record<string, string>;
  /** The template's USER and WORKDIR for envd's /init (InstanceRecord). */
  defaults?: Pick<InstanceRecord, 'defaultUser' | 'defaultWorkdir'>;
  signal: AbortSignal;
  /** A captured layer's archive to start from (LayerStore), instead of an empty writable layer. */
  layerArchive?: string;
  layerContents?: LayerContents;
  /** Volumes attached for it, mounted at boot. */
  volumes?: AttachedVolume[];
  /** Which of the node's runtimes runs it (absent: the default). */
  runtime?: RuntimeKind;
}

export interface LauncherDeps {
  logger: Logger;
  drivers: RuntimeDrivers;
  artifacts: ArtifactStore;
  firewall: Firewall;
  addresses: AddressPool;
  names: ResourceNames;
  records: RecordStore;
  runtimeBundle: () => Promise<RuntimeBundle>;
  envdVersion: string;
  /** Files every sandbox gets in its writable layer (resolv.conf). */
  files: Record<string, string>;
}

export const refOf = (names: ResourceNames, records: RecordStore, r: InstanceRecord): InstanceRef => ({
  instanceId: r.instanceId, dir: records.dirOf(r.instanceId), netnsPath: netnsPath(r.netns), address: r.address,
});

/**
 * Starts and tears down instances: address, namespace and veth, firewall rules, rootfs,
 * runtime, envd health. A record is written before anything is made, so a crash at any
 * step leaves something reconciliation can find; a failure at any step undoes them all.
 */
export class InstanceLauncher {
  constructor(private readonly d: LauncherDeps) {}

  async launch(req: LaunchRequest): Promise<Instance> {
    const driver = this.d.drivers.forCreate(req.runtime);
    const instanceId = ResourceNames.newInstanceId();
    const addr = this.d.addresses.allocate();
    const record: InstanceRecord = {
      instanceId, role: req.role, phase: 'creating', sandboxId: req.sandboxId, templateId: req.templateId,
      artifactId: req.artifactId, runtime: driver.kind, slot: addr.slot, hostAddress: addr.hostAddress,
      address: addr.sandboxAddress, netns: this.d.names.netns(instanceId), hostVeth: this.d.names.hostVeth(instanceId),
      ...req.resources, policy: req.policy, metadata: req.metadata, envdVersion: this.d.envdVersion,
      ...req.defaults, startedAt: new Date().toISOString(), ...(req.volumes?.length ? { volumes: req.volumes } : {}),
    };
    const inst: Instance = { record, ref: refOf(this.d.names, this.d.records, record) };
    const started = Date.now();
    const marks: Record<string, number> = {};
    const mark = (k: string) => { marks[k] = Date.now() - started; };
    try {
      await this.d.records.save(record);
      // In parallel, but every step settles before a failure is acted on: a rollback must not
      // race a namespace that is still being made.
      const [bundle, mountDir, link] = await Promise.allSettled([
        this.d.runtimeBundle(),
        this.mountRootfs(record),
        (async () => {
          await createSandboxLink(record.netns, record.hostVeth, addr);
          await this.d.firewall.add({ instanceId, hostVeth: record.hostVeth, sandboxAddress: record.address, policy: req.policy });
        })(),
      ]);
      for (const r of [bundle, mountDir, link]) if (r.status === 'rejected') throw r.reason;
      mark('prepared');
      req.signal.throwIfAborted();
      const created = await driver.create({
        ...this.specOf(inst, (bundle as PromiseFulfilledResult<RuntimeBundle>).value, (mountDir as PromiseFulfilledResult<string | undefined>).value, req.env),
        ...(req.layerArchive ? { layerArchive: req.layerArchive, layerContents: req.layerContents ?? 'filesystem' } : {}),
        background: req.role === 'warm',
      });
      mark('booted');
      // A parked guest does not run yet: its envd answers once the hand-out unparks it.
      if (created === 'parked') record.parked = true;
      else await waitForEnvd(record.address, req.signal);
      mark('envd');
      record.phase = 'running';
      await this.d.records.save(record);
      this.d.logger.debug({ instanceId, role: req.role, sandboxId: req.sandboxId, marks }, 'instance started');
      return inst;
    } catch (err) {
      const step = marks.booted !== undefined ? 'waiting for envd' : marks.prepared !== undefined ? 'booting' : 'preparing';
      const consoleTail = await driver.consoleTail(inst.ref).catch(() => { /* no console to quote: the warning below goes without it */ return ''; });
      this.d.logger.warn({ instanceId, role: req.role, sandboxId: req.sandboxId, step, ms: Date.now() - started, marks, err: (err as Error).message, console: consoleTail }, 'instance create failed');
      await this.teardown(inst).catch((e) => this.d.logger.error({ err: e, instanceId }, 'rollback of a failed create left something behind'));
      if (err instanceof SvcError && step === 'waiting for envd') {
        throw new SvcError(err.status, `${err.message}; sandbox console: ${consoleTail || '(empty)'}`);
      }
      throw err;
    }
  }

  /** Boots an instance stopped by a filesystem pause again, on its kept writable layer; waits for envd. */
  async reboot(inst: Instance, signal: AbortSignal): Promise<void> {
    const driver = this.d.drivers.of(inst.record);
    if (!driver.reboot) throw new SvcError(400, `the ${driver.kind} runtime cannot boot a sandbox again from its files`);
    const [runtime, mountDir] = await Promise.all([this.d.runtimeBundle(), this.mountRootfs(inst.record)]);
    await driver.reboot(this.specOf(inst, runtime, mountDir, {}));
    await waitForEnvd(inst.record.address, signal);
  }

  /** The template's rootfs, mounted once, when the driver boots from a directory. */
  private mountRootfs(r: InstanceRecord): Promise<string | undefined> {
    return this.d.drivers.of(r).rootfsInput === 'directory' ? this.d.artifacts.mount(r.artifactId) : Promise.resolve(undefined);
  }

  /** What the driver boots: the instance's template, runtime and resources as its record has them. */
  private specOf(inst: Instance, runtime: RuntimeBundle, mountDir: string | undefined, env: Record<string, string>): InstanceSpec {
    const r = inst.record;
    return {
      ...inst.ref, rootfs: { imagePath: this.d.artifacts.imagePath(r.artifactId), ...(mountDir ? { mountDir } : {}) }, runtime,
      resources: { cpuCount: r.cpuCount, memoryMB: r.memoryMB, diskSizeMB: r.diskSizeMB }, env, hostname: 'sandbox', files: this.d.files,
      ...(r.volumes?.length && !r.volumesDetached ? { mounts: r.volumes.map((v) => ({ hostPath: v.hostPath, path: v.path, readOnly: v.readOnly })) } : {}),
    };
  }

  /** Runs a parked warm instance (RuntimeDriver.unpark) until its envd answers; a no-op for one that runs. */
  async unpark(inst: Instance, signal: AbortSignal): Promise<void> {
    if (!inst.record.parked) return;
    const driver = this.d.drivers.of(inst.record);
    if (!driver.unpark) throw new Error(`the ${driver.kind} runtime parked instance ${inst.record.instanceId} but cannot unpark it`);
    await driver.unpark(inst.ref);
    await waitForEnvd(inst.record.address, signal);
    inst.record.parked = false;
  }

  /** A warm instance handed out: from now on it weighs as much as any sandbox. */
  async foreground(inst: Instance): Promise<void> {
    await this.d.drivers.of(inst.record).foreground?.(inst.ref);
  }

  /** Releases everything an instance holds; safe on a half-made one and safe to repeat. */
  async teardown(inst: Instance): Promise<void> {
    const r = inst.record;
    if (r.phase !== 'creating') {
      r.phase = 'destroying';
      await this.d.records.save(r).catch((err: Error) => this.d.logger.warn({ instanceId: r.instanceId, err: err.message }, 'teardown: could not record the phase; reconciliation finds the instance'));
    }
    // Every step runs even when an earlier one fails, so one stuck part does not pin the rest.
    const errors: unknown[] = [];
    const step = async (fn: () => Promise<unknown>) => { try { await fn(); } catch (e) { errors.push(e); } };
    await step(() => this.d.drivers.of(r).destroy(inst.ref));
    await step(() => this.d.firewall.remove(r.instanceId));
    await step(() => destroySandboxLink(r.netns, r.hostVeth));
    // Before the address is free: the next sandbox given it inherits none of these connections.
    const unforgotten = await forgetConnections(r.address, 'all');
    if (unforgotten) this.d.logger.warn({ instanceId: r.instanceId, address: r.address, err: unforgotten }, 'teardown: the host still tracks connections of the address it frees');
    if (errors.length) throw errors[0];
    this.d.addresses.release(r.slot);
    await this.d.records.remove(r.instanceId);
    await rm(inst.ref.dir, { recursive: true, force: true });
  }
}
