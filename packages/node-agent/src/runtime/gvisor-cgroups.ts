import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '@svc/common';
import type { ResourceNames } from '../names.ts';

const CGROUP_ROOT = '/sys/fs/cgroup';
const CGROUP_CONTROLLERS = ['blkio', 'cpu', 'cpuacct', 'cpuset', 'devices', 'freezer', 'memory', 'pids', 'systemd'];

/**
 * The host cgroups (v1) runsc makes for this agent's sandboxes, under one parent per
 * controller: their files, the freezer a pause uses, and their removal.
 */
export class SandboxCgroups {
  private readonly janitor = new Map<string, Promise<void>>();

  constructor(private readonly o: { names: ResourceNames; logger: Logger }) {}

  /** A file of a container's cgroup under one controller (`container` is the runsc container id). */
  file(controller: string, container: string, file: string): string {
    return join(CGROUP_ROOT, controller, this.o.names.cgroupParent, container, file);
  }

  freezerState(container: string): string {
    return this.file('freezer', container, 'freezer.state');
  }

  async setFreezer(container: string, want: 'FROZEN' | 'THAWED'): Promise<void> {
    const file = this.freezerState(container);
    if (!existsSync(file)) throw new Error(`no freezer cgroup at ${file}`);
    await writeFile(file, want);
    for (let i = 0; i < 200; i++) {
      if ((await readFile(file, 'utf8')).trim() === want) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`freezer did not reach ${want}`);
  }

  /**
   * Caps the host tasks of all this agent's sandboxes together (the parent's pids.max), made
   * first when no sandbox made it yet; runsc makes each sandbox's cgroup under it.
   */
  async limitAllTasks(max: number): Promise<void> {
    const dir = join(CGROUP_ROOT, 'pids', this.o.names.cgroupParent);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'pids.max'), String(max));
  }

  /** Caps one sandbox's host tasks (its cgroup's pids.max). */
  async limitTasks(container: string, max: number): Promise<void> {
    await writeFile(this.file('pids', container, 'pids.max'), String(max));
  }

  /** How many times the sandbox's cgroup refused a new task at its cap (pids.events `max`). */
  async tasksRefused(container: string): Promise<number> {
    const text = await readFile(this.file('pids', container, 'pids.events'), 'utf8');
    return Number(/^max (\d+)$/m.exec(text)?.[1] ?? 0);
  }

  /** Removes the parent cgroups once no sandbox of this agent is left. */
  async removeParents(): Promise<void> {
    for (const c of CGROUP_CONTROLLERS) await rmdir(join(CGROUP_ROOT, c, this.o.names.cgroupParent)).catch(() => { /* still holds sandboxes, or never made */ });
  }

  /** Per-controller cgroup directories of this agent's sandboxes (reconciliation). */
  async list(): Promise<string[]> {
    const ids = new Set<string>();
    for (const c of CGROUP_CONTROLLERS) {
      const dirs = await readdir(join(CGROUP_ROOT, c, this.o.names.cgroupParent)).catch(() => { /* no parent under this controller yet: no sandboxes there */ return [] as string[]; });
      for (const d of dirs) {
        const inst = this.o.names.instanceOfContainer(d);
        if (inst) ids.add(inst);
      }
    }
    return [...ids];
  }

  /**
   * Removes a sandbox's cgroups. A killed sandbox's zombies keep them busy until the host's
   * PID 1 reaps them (instant under systemd, seconds under some container inits), so what
   * cannot go yet is retried in the background; `settled()` waits for that.
   */
  async remove(containerId: string): Promise<void> {
    if (await this.tryRemove(containerId)) return;
    if (this.janitor.has(containerId)) return;
    const job = (async () => {
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        if (await this.tryRemove(containerId)) return;
      }
      this.o.logger.warn({ containerId }, 'sandbox cgroups still busy after 60 s; reconciliation removes them later');
    })().finally(() => this.janitor.delete(containerId));
    this.janitor.set(containerId, job);
  }

  /** Resolves when the container's background removal (if any) is done. */
  async removed(containerId: string): Promise<void> {
    await this.janitor.get(containerId);
  }

  /** Resolves when background cgroup removals are done. */
  async settled(): Promise<void> {
    while (this.janitor.size) await Promise.all(this.janitor.values());
  }

  private async tryRemove(containerId: string): Promise<boolean> {
    let done = true;
    for (const c of CGROUP_CONTROLLERS) {
      await rmdir(join(CGROUP_ROOT, c, this.o.names.cgroupParent, containerId)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') done = false;
      });
    }
    return done;
  }
}
