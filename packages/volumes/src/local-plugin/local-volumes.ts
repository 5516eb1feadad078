/**
 * The built-in `local` volume plugin: each volume is a directory on the host, `<root>/<volumeId>`,
 * which Attach bind-mounts at `<volume_base_dir>/local-<volumeId>`. Its data lives on one host
 * (or on storage shared by every host at the same `root`); an example of the protocol for
 * plugin authors (docs/volume-plugins.md), run as a binary (binary-main.ts) or as a gRPC
 * service (rpc-server.ts).
 *
 *   create   makes the data directory (mode 0777: sandbox users of any uid write into it) and a
 *            token kept beside it in `<root>/<volumeId>.token`; again: the same token.
 *   destroy  deletes the data directory (renamed away first, then removed without following a
 *            link: data-root.ts) and the token; a missing volume is fine.
 *   attach   bind-mounts the data at the host path, unless it is mounted there already.
 *   detach   at ref_count 0, unmounts the host path and removes the empty directory; the data stays.
 *
 * The root itself is made 0700, an existing one made for svc too, at the first hook of the process.
 */
import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, readFile, rm, rmdir, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, isAbsolute, join } from 'node:path';
import {
  HOST_BIND_TIMEOUT_MS,
  type AttachHookInput,
  type AttachHookOutput,
  type CreateHookInput,
  type CreateHookOutput,
  type DestroyHookInput,
  type DetachHookInput,
  type VolumeControllerHooks,
  type VolumeNodeHooks,
} from '@svc/contracts/volumes';
import { systemDirectory } from '@svc/common';
import { prepareDataRoot, removeVolumeData } from './data-root.ts';
import { bindMount, mountCount, unmount } from './mounts.ts';

export const DEFAULT_LOCAL_VOLUME_ROOT = '/data/svc-shared/volume-data';
const LOCAL_VOLUME_ID_PATTERN = /^[a-zA-Z0-9_-]{1,128}$/;
const TOKEN_PREFIX = 'svcvol_';
/** Stacked mounts a detach takes off (more than one only after crashes between mount and answer). */
const MAX_UNMOUNTS = 8;

/** What went wrong, for a caller that maps it (the gRPC server to a status). */
export type LocalVolumeErrorKind = 'invalid' | 'not_found' | 'failed';

export class LocalVolumeError extends Error {
  readonly kind: LocalVolumeErrorKind;
  constructor(kind: LocalVolumeErrorKind, message: string) {
    super(message);
    this.name = 'LocalVolumeError';
    this.kind = kind;
  }
}

export interface LocalVolumesOptions {
  /** Where the volumes' data lives; default $SVC_LOCAL_VOLUME_ROOT, else DEFAULT_LOCAL_VOLUME_ROOT. */
  root?: string;
  /** Deadline of each mount and umount; default HOST_BIND_TIMEOUT_MS. */
  mountTimeoutMs?: number;
  /** Where a notice for the operator goes (a root it made 0700); default stderr, a plugin's log. */
  log?: (message: string) => void;
}

export class LocalVolumes implements VolumeControllerHooks, VolumeNodeHooks {
  readonly root: string;
  private readonly mountTimeoutMs: number;
  private readonly log: (message: string) => void;
  /** The root made 0700, once a process (prepareRoot). */
  private rootReady?: Promise<void>;
  /** The attach or detach last queued for each volume. */
  private readonly running = new Map<string, Promise<void>>();

  constructor(opts: LocalVolumesOptions = {}) {
    this.root = opts.root ?? (process.env.SVC_LOCAL_VOLUME_ROOT || DEFAULT_LOCAL_VOLUME_ROOT);
    if (!isAbsolute(this.root)) throw new Error(`local volume root ${JSON.stringify(this.root)} must be an absolute path`);
    // Its root is made 0700 (data-root.ts): a root of /tmp or / would take the host's from its users.
    const system = systemDirectory(this.root);
    if (system !== undefined) throw new Error(`local volume root ${JSON.stringify(this.root)} is the system directory ${system}: choose a directory of its own (SVC_LOCAL_VOLUME_ROOT)`);
    this.mountTimeoutMs = opts.mountTimeoutMs ?? HOST_BIND_TIMEOUT_MS;
    this.log = opts.log ?? ((message) => process.stderr.write(`svc-volume-local: ${message}\n`));
  }

  /**
   * Makes the root, and makes it 0700 if it is not (data-root.ts says why); run by the first
   * hook of a process, and by the rpc service at its start. Says so when it changed the mode,
   * or could not.
   */
  async prepareRoot(): Promise<void> {
    this.rootReady ??= prepareDataRoot(this.root).then((r) => {
      const mode = (m: number) => `0${m.toString(8)}`;
      if (r.changedFrom !== undefined) this.log(`made the volume data root ${this.root} ${mode(0o700)} (it was ${mode(r.changedFrom)}: other users of the host could reach the volumes' data)`);
      if (r.chmodError) this.log(`the volume data root ${this.root} could not be made 0700 (${r.chmodError}): other users of the host may reach the volumes' data`);
      if (r.leftAlone) this.log(`the volume data root ${this.root} was not made 0700 (${r.leftAlone}): other users of the host may reach the volumes' data; choose a directory of its own (SVC_LOCAL_VOLUME_ROOT)`);
    }, (err: Error) => {
      this.rootReady = undefined; // the next hook tries again
      throw err;
    });
    return this.rootReady;
  }

  /** The directory that holds a volume's data. */
  dataDir(volumeId: string): string {
    return join(this.root, checkVolumeId(volumeId));
  }

  /** Where attach mounts a volume under a node's volume_plugin_base_dir. */
  hostPath(volumeBaseDir: string, volumeId: string): string {
    if (!isAbsolute(volumeBaseDir)) throw new LocalVolumeError('invalid', `volume_base_dir ${JSON.stringify(volumeBaseDir)} must be an absolute path`);
    return join(volumeBaseDir, `local-${checkVolumeId(volumeId)}`);
  }

  async create(input: CreateHookInput): Promise<CreateHookOutput> {
    const data = this.dataDir(input.volumeId);
    await this.prepareRoot();
    await mkdir(data, { recursive: true });
    await chmod(data, 0o777);
    return { token: await this.token(input.volumeId), privateData: '' };
  }

  async destroy(input: DestroyHookInput): Promise<void> {
    checkVolumeId(input.volumeId);
    await this.prepareRoot();
    await removeVolumeData(this.root, input.volumeId);
    // Last: a Destroy that failed above keeps the token, and a Create again answers the same one.
    await rm(this.tokenFile(input.volumeId), { force: true });
  }

  /** Attach and detach of one volume run one at a time in this process (the rpc server takes calls concurrently). */
  async attach(input: AttachHookInput): Promise<AttachHookOutput> {
    return this.oneAtATime(input.volumeId, () => this.attachNow(input));
  }

  async detach(input: DetachHookInput): Promise<void> {
    return this.oneAtATime(input.volumeId, () => this.detachNow(input));
  }

  private async attachNow(input: AttachHookInput): Promise<AttachHookOutput> {
    const data = this.dataDir(input.volumeId);
    const hostPath = this.hostPath(input.volumeBaseDir, input.volumeId);
    await this.prepareRoot();
    const found = await stat(data).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    // No path in the message: it may reach an API caller, who has no business with the host's layout.
    if (!found?.isDirectory()) throw new LocalVolumeError('not_found', `volume ${input.volumeId} has no data on this host`);
    const answer = { hostPath, metadata: { data_dir: data, host_path: hostPath } };
    // mounted already: by an earlier holder (ref_count > 0), or by an attach whose answer was lost
    if ((await mountCount(hostPath)) > 0) return answer;
    await mkdir(hostPath, { recursive: true });
    try {
      await bindMount(data, hostPath, this.mountTimeoutMs);
    } catch (err) {
      throw new LocalVolumeError('failed', (err as Error).message);
    }
    return answer;
  }

  private async detachNow(input: DetachHookInput): Promise<void> {
    checkVolumeId(input.volumeId);
    if (input.refCount > 0) return;
    const hostPath = input.metadata.host_path;
    if (typeof hostPath !== 'string' || !isAbsolute(hostPath) || basename(hostPath) !== `local-${input.volumeId}`) {
      throw new LocalVolumeError('invalid', `detach needs the metadata attach returned: host_path must be an absolute path ending in local-${input.volumeId}`);
    }
    for (let i = 0; i < MAX_UNMOUNTS && (await mountCount(hostPath)) > 0; i++) {
      try {
        await unmount(hostPath, this.mountTimeoutMs);
      } catch (err) {
        throw new LocalVolumeError('failed', (err as Error).message);
      }
    }
    if ((await mountCount(hostPath)) > 0) throw new LocalVolumeError('failed', `${hostPath} is still mounted after ${MAX_UNMOUNTS} unmounts`);
    try {
      await rmdir(hostPath);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // ENOENT: gone already (a repeated detach). ENOTEMPTY: files were written into the bare
      // directory, not into the volume; they are not ours to delete, and the volume is detached.
      if (code !== 'ENOENT' && code !== 'ENOTEMPTY') throw err;
    }
  }

  private async oneAtATime<T>(volumeId: string, fn: () => Promise<T>): Promise<T> {
    const before = this.running.get(volumeId) ?? Promise.resolve();
    const run = before.then(fn);
    const settled = run.then(
      () => undefined,
      () => { /* the failure is fn's caller's answer through `run`; the next call only waits for this one */ },
    );
    this.running.set(volumeId, settled);
    try {
      return await run;
    } finally {
      if (this.running.get(volumeId) === settled) this.running.delete(volumeId);
    }
  }

  private tokenFile(volumeId: string): string {
    return join(this.root, `${checkVolumeId(volumeId)}.token`);
  }

  /** The volume's token: made once, kept 0600; a repeated create reads it back. */
  private async token(volumeId: string): Promise<string> {
    const file = this.tokenFile(volumeId);
    const existing = await readToken(file);
    if (existing) return existing;
    const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    // written whole under a private name, then linked into place: a crash never leaves half a
    // token, and of two concurrent creates the first link wins and both answer its token
    const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(tmp, token, { mode: 0o600, flag: 'wx' });
    try {
      await link(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      await unlink(tmp);
    }
    const stored = await readToken(file);
    if (!stored) throw new LocalVolumeError('failed', `${file} holds no token`);
    return stored;
  }
}

async function readToken(file: string): Promise<string | undefined> {
  try {
    return (await readFile(file, 'utf8')).trim() || undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** A volume id names a directory: only [a-zA-Z0-9_-], so it cannot leave the root. */
function checkVolumeId(volumeId: string): string {
  if (typeof volumeId !== 'string' || !LOCAL_VOLUME_ID_PATTERN.test(volumeId)) {
    throw new LocalVolumeError('invalid', `volume id ${JSON.stringify(volumeId)} must match ^[a-zA-Z0-9_-]{1,128}$`);
  }
  return volumeId;
}
