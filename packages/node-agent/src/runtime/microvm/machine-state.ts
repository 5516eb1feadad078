import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { SvcError, type Logger } from '@svc/common';
import { run } from '../../host/exec.ts';
import { createCappedTar } from '../capped-tar.ts';
import type { InstanceRef, InstanceSpec, PauseResult } from '../driver.ts';
import { appendAgentLine } from '../console-file.ts';
import { SANDBOX_SUDO } from '../runtime-bundle.ts';
import { clearEnvdToken, execThroughEnvd, renewThroughEnvd } from './envd-exec.ts';
import { ensureGuestNetwork } from './guest-network.ts';
import { microvmPaths } from './instance-files.ts';
import { readLaunch, saveLaunch, writeLaunch, type MachineOptions } from './qemu-command.ts';
import { mapsTemplateMemory, withOwnMemory } from './template-memory.ts';
import { endQemu, qemuPid, startQemu, withQmp } from './qemu-process.ts';

/** Writing guest memory to disk: bounded by the guest's size and the disk, not by QEMU's answer time. */
const MIGRATE_TIMEOUT_MS = 300_000;

/** machine.json in a captured machine's archive. */
interface SavedMachine {
  resources?: InstanceSpec['resources'];
  envdToken?: string;
  /** Saved from a clone: its RAM block is the named backend (LaunchSpec.memoryBackend). */
  memoryBackend?: boolean;
}

/** The migration capability that leaves shared RAM (a template's memory file) out of the stream. */
const ignoreShared = (state: boolean) => ({ capabilities: [{ capability: 'x-ignore-shared', state }] });

/** What saving and restoring a guest's whole state needs of the driver. */
export interface MachineStateDeps extends MachineOptions {
  logger: Logger;
  qemu: string;
  /** The read-only runtime disk of the instance's bundle (guest-assets.ts ensureRuntimeDisk). */
  runtimeDisk: (spec: InstanceSpec) => Promise<string>;
  envdTokenOf: (instanceId: string) => string | undefined;
}

/**
 * A guest's whole state (memory, devices) on disk: the memory pause and its resume, and
 * captured machines (snapshots with memory) and the sandboxes restored from them.
 */
export class MachineState {
  constructor(private readonly o: MachineStateDeps) {}

  /**
   * Stops the guest, writes its whole state (memory, devices) to `memory.state` and ends QEMU.
   * A failed save leaves the guest running as it was.
   */
  async save(ref: InstanceRef, o: { ignoreShared?: boolean } = {}): Promise<PauseResult> {
    const paths = microvmPaths(ref.dir);
    const tmp = `${paths.state}.tmp`;
    await rm(tmp, { force: true });
    await withQmp(ref, async (q) => {
      await q.execute('stop');
      try {
        // A template guest's RAM is its shared file already: only device state goes to the stream.
        // Set either way: a clone's QEMU keeps the capability from its own start, and a stream
        // written with it carries fields that a resume without it reads as something else.
        await q.execute('migrate-set-capabilities', ignoreShared(!!o.ignoreShared));
        await q.execute('migrate', { uri: `exec:cat > ${tmp}` });
        const deadline = Date.now() + MIGRATE_TIMEOUT_MS;
        while (true) {
          const m = await q.execute<{ status?: string; 'error-desc'?: string }>('query-migrate');
          if (m.status === 'completed') break;
          if (m.status === 'failed' || m.status === 'cancelled') throw new Error(`saving the guest failed: ${m['error-desc'] ?? m.status}`);
          if (Date.now() > deadline) {
            await q.execute('migrate_cancel').catch((err: Error) => this.o.logger.warn({ instanceId: ref.instanceId, err: err.message }, 'the overdue save could not be cancelled; the guest is continued anyway'));
            throw new Error('saving the guest took too long');
          }
          await new Promise((r) => setTimeout(r, 10));
        }
      } catch (err) {
        await q.execute('cont').catch((e: Error) => this.o.logger.error({ instanceId: ref.instanceId, err: e.message }, 'guest could not be continued after a failed save'));
        await rm(tmp, { force: true });
        throw err;
      }
      await q.execute('quit').catch(() => { /* QEMU may close the socket before answering quit */ });
    });
    const deadline = Date.now() + 10_000;
    while (await qemuPid(ref)) {
      if (Date.now() > deadline) { await endQemu(ref); break; }
      await new Promise((r) => setTimeout(r, 5));
    }
    await rename(tmp, paths.state);
    await this.ownMemoryFromNowOn(ref);
    return { kind: 'snapshot', snapshotBytes: (await stat(paths.state)).size };
  }

  /**
   * A clone's whole RAM is in its saved state now: it resumes on anonymous RAM of the same name,
   * needing nothing of the template's file (template-memory.ts withOwnMemory).
   */
  private async ownMemoryFromNowOn(ref: InstanceRef): Promise<void> {
    const launch = await readLaunch(ref.dir).catch(() => { /* no launch.json (an instance started before it was kept): nothing to rewrite, its resume says what is missing */ return undefined; });
    if (!launch?.resources || !mapsTemplateMemory(launch.argv)) return;
    await saveLaunch(ref.dir, { ...launch, argv: withOwnMemory(launch.argv, launch.resources.memoryMB) });
  }

  /** Starts QEMU again on the saved state; the guest goes on where it stopped. */
  async resume(ref: InstanceRef): Promise<void> {
    const paths = microvmPaths(ref.dir);
    if (!existsSync(paths.state)) {
      if (await qemuPid(ref)) return; // running already
      throw new Error(`instance ${ref.instanceId} has no saved state to resume from`);
    }
    const launch = await readLaunch(ref.dir);
    await ensureGuestNetwork(ref.netnsPath);
    await this.startFrom(ref, launch.argv, paths.state);
    await rm(paths.state, { force: true });
  }

  /**
   * QEMU on a saved state until the guest runs (continueFrom). A clone of a template's memory
   * file (`ignoreShared`) waits first (startWaiting) and then reads device state only.
   */
  async startFrom(ref: InstanceRef, argv: string[], state: string, o: { envdToken?: string; ignoreShared?: boolean } = {}): Promise<void> {
    if (o.ignoreShared) await this.startWaiting(ref, argv);
    else await startQemu(this.o.qemu, ref, argv, `exec:cat ${state}`);
    await this.continueFrom(ref, state, { envdToken: o.envdToken, waiting: o.ignoreShared });
  }

  /**
   * A clone's QEMU, mapping its template's memory file, started with `-incoming defer`: it holds
   * no guest page and runs nothing until continueFrom tells it to read its device state
   * (template-memory.ts; a warm clone waits like this in the pool).
   */
  startWaiting(ref: InstanceRef, argv: string[]): Promise<void> {
    return startQemu(this.o.qemu, ref, argv, 'defer');
  }

  /**
   * The guest's saved state loaded until the guest runs (`waiting`: QEMU was started by
   * startWaiting and reads device state only now), then its clock set to the host's (it stood
   * still while the state was on disk) and its random pool reseeded (guests restored from one
   * template state would draw the same numbers). A guest that does not come back is ended.
   */
  async continueFrom(ref: InstanceRef, state: string, o: { envdToken?: string; waiting?: boolean } = {}): Promise<void> {
    const started = Date.now();
    try {
      await withQmp(ref, async (q) => {
        if (o.waiting) {
          await q.execute('migrate-set-capabilities', ignoreShared(true));
          await q.execute('migrate-incoming', { uri: `exec:cat ${state}` });
        }
        const deadline = Date.now() + MIGRATE_TIMEOUT_MS;
        while (true) {
          const s = await q.execute<{ status: string }>('query-status');
          if (s.status === 'running') return;
          if (s.status === 'paused' || s.status === 'postmigrate') { await q.execute('cont'); return; }
          if (s.status !== 'inmigrate') throw new Error(`the guest did not come back from its saved state (status ${s.status})`);
          if (Date.now() > deadline) throw new Error('loading the guest took too long');
          await new Promise((r) => setTimeout(r, 10));
        }
      });
    } catch (err) {
      await endQemu(ref);
      throw err;
    }
    const loadedMs = Date.now() - started;
    await this.renew(ref, o.envdToken);
    // Under TCG the renewal, the first request after a restore, costs most of it: QEMU translates
    // every guest code path afresh (docs/runtimes.md, "Measured").
    this.o.logger.debug({ instanceId: ref.instanceId, loadedMs, renewedMs: Date.now() - started - loadedMs, deviceStateOnly: !!o.waiting }, 'guest restored');
  }

  /**
   * The clock set to the host's and the kernel's random pool reseeded, by the helper envd started
   * at the guest's boot (envd's POST /svc/after-restore, docs/runtimes.md "Clock and randomness
   * after every restore"). A failure is logged: the guest runs on, with a clock behind and, if
   * its template's, random numbers its siblings draw too.
   */
  private async renew(ref: InstanceRef, envdToken: string | undefined): Promise<void> {
    const renewal = { timeMs: Date.now(), seed: randomBytes(64).toString('hex') };
    try {
      if (!ref.address) throw new Error(`instance ${ref.instanceId} has no address to reach its envd at`);
      const target = { address: ref.address, accessToken: envdToken ?? this.o.envdTokenOf(ref.instanceId) };
      if (await renewThroughEnvd(target, renewal) === 'done') return;
      // An envd older than its helper (a snapshot taken before it had one): svc-sudo as a command,
      // the restored guest's first, which under TCG costs about 450 ms more.
      const set = await execThroughEnvd(target, [SANDBOX_SUDO, '--after-restore', String(Date.now()), renewal.seed], { timeoutMs: 10_000 });
      if (set.code !== 0) throw new Error(set.stderr.trim() || `svc-sudo --after-restore exited with ${set.code}`);
    } catch (err) {
      this.o.logger.warn({ instanceId: ref.instanceId, err: (err as Error).message }, 'the guest clock and random pool could not be renewed after a restore');
    }
  }

  /**
   * Writes a paused instance's machine: its writable layer's image, its saved state, and its
   * shape and envd token (machine.json), which a restore needs (its memory holds the token anyway).
   */
  async capture(ref: InstanceRef, archivePath: string, maxBytes: number): Promise<void> {
    const paths = microvmPaths(ref.dir);
    if (!existsSync(paths.state)) throw new Error(`instance ${ref.instanceId} is not paused to a file; its machine cannot be read`);
    const launch = await readLaunch(ref.dir);
    const machine: SavedMachine = { resources: launch.resources, envdToken: this.o.envdTokenOf(ref.instanceId), ...(launch.memoryBackend ? { memoryBackend: true } : {}) };
    await writeFile(paths.machine, JSON.stringify(machine) + '\n', { mode: 0o600 });
    try {
      // Capped as a layer's (capped-tar.ts): disk.ext4 is the guest's, written raw.
      await createCappedTar(archivePath, ['--sparse', '-C', ref.dir, 'disk.ext4', 'memory.state', 'machine.json'], { maxBytes, what: 'capturing the sandbox\'s machine' });
    } finally {
      await rm(paths.machine, { force: true });
    }
  }

  /**
   * A new sandbox that goes on from a captured machine: its disk and memory, its processes. Its
   * envd still holds the old sandbox's token, which is cleared here so that /init gives it the new one.
   */
  async restore(spec: InstanceSpec, archive: string): Promise<void> {
    const paths = microvmPaths(spec.dir);
    await mkdir(spec.dir, { recursive: true });
    await run('tar', ['--extract', `--file=${archive}`, '-C', spec.dir, 'disk.ext4', 'memory.state', 'machine.json'], { timeoutMs: 600_000, what: 'restoring the snapshot\'s machine' });
    const machine = JSON.parse(await readFile(paths.machine, 'utf8')) as SavedMachine;
    await rm(paths.machine, { force: true });
    const want = machine.resources;
    if (want && (want.cpuCount !== spec.resources.cpuCount || want.memoryMB !== spec.resources.memoryMB)) {
      throw new SvcError(409, `this snapshot holds a machine of ${want.cpuCount} CPUs and ${want.memoryMB} MB; it cannot start as ${spec.resources.cpuCount} CPUs and ${spec.resources.memoryMB} MB`);
    }
    await ensureGuestNetwork(spec.netnsPath);
    // A clone's state names its RAM block after the backend: it loads only into the same name.
    const launch = await writeLaunch(this.o, spec, await this.o.runtimeDisk(spec), [], machine.memoryBackend ? { kind: 'ram' } : undefined);
    await appendAgentLine(paths.console, `sandbox restored from a snapshot of a machine (QEMU microvm, ${this.o.accel})`);
    await this.startFrom(spec, launch.argv, paths.state, { envdToken: machine.envdToken });
    await rm(paths.state, { force: true });
    if (machine.envdToken && spec.address) await clearEnvdToken({ address: spec.address, accessToken: machine.envdToken });
  }
}
