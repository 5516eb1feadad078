import { rm } from 'node:fs/promises';
import type { Logger } from '@svc/common';
import { listMountPoints, unmount } from '../host/mounts.ts';
import type { ResourceNames } from '../names.ts';
import type { AddressPool } from '../network/address-pool.ts';
import type { Firewall } from '../network/firewall.ts';
import { destroySandboxLink, listLinks, listNetns, netnsPath } from '../network/netns.ts';
import type { RuntimeDrivers } from '../runtime/drivers.ts';
import { refOf, type Instance, type InstanceLauncher } from './instances.ts';
import type { RecordStore } from './record.ts';

export interface ReconcileDeps {
  logger: Logger;
  drivers: RuntimeDrivers;
  records: RecordStore;
  names: ResourceNames;
  firewall: Firewall;
  addresses: AddressPool;
  launcher: InstanceLauncher;
}

export interface ReconcileReport {
  adopted: Instance[];
  removed: string[];
}

/**
 * Runs at start, before the agent serves: adopts the user sandboxes it recorded that still
 * run (or stay paused), and removes everything else carrying this agent's names: half-made
 * or warm instances, runtime containers, namespaces, veths, mounts, cgroups, firewall rules.
 */
export async function reconcile(d: ReconcileDeps): Promise<ReconcileReport> {
  const { records, strayDirs } = await d.records.loadAll();
  const adopted: Instance[] = [];
  const doomed: Instance[] = [];
  /** Instances of a runtime this node no longer offers: nothing here can stop them, so they are left as they are. */
  const foreign: Instance[] = [];
  for (const r of records) {
    const inst = { record: r, ref: refOf(d.names, d.records, r) };
    const driver = d.drivers.find(r.runtime);
    if (!driver) {
      d.addresses.reserve(r.slot);
      foreign.push(inst);
      d.logger.error({ instanceId: r.instanceId, sandboxId: r.sandboxId, runtime: r.runtime, offered: d.drivers.kinds() }, 'an instance runs on a runtime this node no longer offers (node_agent.runtime): left alone, with its address, until the node offers it again');
      continue;
    }
    const live = r.role === 'sandbox' && (r.phase === 'running' || r.phase === 'paused') && !!r.sandboxId;
    if (live && d.addresses.reserve(r.slot)) {
      // Paused without its memory, nothing of it runs: its kept writable layer is what it is.
      if (r.phase === 'paused' && r.pauseKind === 'filesystem') {
        const kept = await driver.keptLayer?.(inst.ref).catch((err: Error) => {
          d.logger.warn({ instanceId: r.instanceId, err: err.message }, 'the writable layer of a filesystem-paused sandbox could not be mounted again');
          return false;
        });
        if (kept) { adopted.push(inst); continue; }
        d.addresses.release(r.slot);
        doomed.push(inst);
        continue;
      }
      const status = await driver.status(inst.ref).catch((err: Error) => {
        d.logger.warn({ instanceId: r.instanceId, sandboxId: r.sandboxId, err: err.message }, 'runtime status unreadable at start; the instance is taken as stopped');
        return 'stopped' as const;
      });
      if (status === 'running' || status === 'paused') {
        r.phase = status;
        await d.records.save(r);
        adopted.push(inst);
        continue;
      }
      d.addresses.release(r.slot);
    }
    doomed.push(inst);
  }

  // The table is rebuilt from the adopted sandboxes alone, which drops every stale rule at once.
  await d.firewall.rebuild(adopted.map(({ record: r }) => ({
    instanceId: r.instanceId, hostVeth: r.hostVeth, sandboxAddress: r.address, policy: r.policy,
  })));

  const removed: string[] = [];
  for (const inst of doomed) {
    await d.launcher.teardown(inst).catch((err) => d.logger.warn({ err, instanceId: inst.record.instanceId }, 'orphan teardown failed'));
    removed.push(inst.record.instanceId);
  }

  const keep = new Set([...adopted, ...foreign].map((i) => i.record.instanceId));
  for (const driver of d.drivers.all()) await driver.sweep(keep, (id) => d.records.dirOf(id), (id) => netnsPath(d.names.netns(id)));
  for (const name of await listNetns()) {
    const id = d.names.instanceOfNetns(name);
    if (id && !keep.has(id)) { await destroySandboxLink(name, d.names.hostVeth(id)); removed.push(id); }
  }
  for (const link of await listLinks()) {
    const id = d.names.instanceOfVeth(link);
    if (id && !keep.has(id)) { await destroySandboxLink(d.names.netns(id), link); removed.push(id); }
  }
  const prefix = d.records.root + '/';
  for (const mp of (await listMountPoints()).reverse()) {
    if (!mp.startsWith(prefix)) continue;
    const id = mp.slice(prefix.length).split('/')[0];
    if (!keep.has(id)) await unmount(mp).catch((err) => d.logger.warn({ err, mp }, 'orphan unmount failed'));
  }
  for (const id of strayDirs) {
    if (!keep.has(id)) { await rm(d.records.dirOf(id), { recursive: true, force: true }); removed.push(id); }
  }

  const unique = [...new Set(removed)];
  if (adopted.length || unique.length) d.logger.info({ adopted: adopted.map((i) => i.record.sandboxId), removed: unique }, 'reconciled after start');
  return { adopted, removed: unique };
}
