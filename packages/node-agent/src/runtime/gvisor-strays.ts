import { readdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '@svc/common';
import type { ResourceNames } from '../names.ts';
import { detachLoopDevice, loopDevicesUnder } from './disk-layer.ts';

/** What a sweep of gVisor sandboxes finds left behind by a crashed agent besides runsc's state files. */
export interface StrayOptions {
  /** runsc's --root of this agent: its processes carry it on their command line. */
  stateRoot: string;
  names: ResourceNames;
  logger: Logger;
}

/** The pids now running (every numeric entry of /proc). */
async function processIds(): Promise<string[]> {
  return (await readdir('/proc')).filter((p) => /^\d+$/.test(p));
}

/** A process's argv joined by NULs; empty once it has ended (or for a zombie). */
function cmdlineOf(pid: string): Promise<string> {
  return readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* no such process: it ended while /proc was read */ return ''; });
}

/** runsc processes of this agent's root whose state file is gone (nothing else would stop them). */
export async function killStrayProcesses(o: StrayOptions, keep: Set<string>): Promise<void> {
  const marker = `--root=${o.stateRoot}`;
  for (const pid of await processIds()) {
    const cmdline = await cmdlineOf(pid);
    const argv = cmdline.split('\0');
    if (!argv[0]?.startsWith('runsc') || !argv.includes(marker)) continue;
    const bundle = /\/instances\/([a-z0-9]+)\/bundle/.exec(cmdline)?.[1];
    const container = argv.map((a) => o.names.instanceOfContainer(a)).find(Boolean);
    const instanceId = bundle ?? container;
    if (instanceId && !keep.has(instanceId)) { try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ } }
  }
}

/**
 * A crashed agent's `runsc run` children keep going and finish the container after the
 * crash: wait for them (bounded), or the sweep would miss a container created just after it.
 */
export async function waitForRunsInFlight(o: StrayOptions, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const marker = `--root=${o.stateRoot}`;
  while (Date.now() < deadline) {
    let busy = false;
    for (const pid of await processIds()) {
      const argv = (await cmdlineOf(pid)).split('\0');
      if (argv.includes(marker) && (argv.includes('run') || argv.includes('create') || argv.includes('start'))) { busy = true; break; }
    }
    if (!busy) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Writable-layer loop devices still attached for instances not kept (a lazy unmount after a crash). */
export async function detachStrayLoopDevices(o: StrayOptions, keep: Set<string>, dirOf: (instanceId: string) => string): Promise<void> {
  const instancesRoot = dirname(dirOf('x'));
  for (const { dev, backingFile } of await loopDevicesUnder(instancesRoot)) {
    const instanceId = backingFile.slice(instancesRoot.length + 1).split('/')[0];
    if (instanceId && !keep.has(instanceId)) {
      o.logger.info({ dev, instanceId }, 'detaching the loop device of a removed sandbox');
      await detachLoopDevice(dev);
    }
  }
}
