import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, link, lstat, mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { badRequest, conflict, notFound, type Logger } from '@svc/common';
import type { ArtifactOnNode, EnsureArtifact } from '@svc/contracts/node-agent';
import { run } from '../host/exec.ts';
import { isMountPoint, listMountPoints, unmount } from '../host/mounts.ts';
import { type MasterDownloads, downloadVerified, fileDigest } from './verified-download.ts';

const ARTIFACT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function checkArtifactId(id: string) {
  if (!ARTIFACT_ID.test(id)) throw badRequest(`artifact id ${JSON.stringify(id)} is not valid (letters, digits, . _ -, at most 128)`);
}

/**
 * Template root filesystems on this node: `<dir>/<artifactId>.ext4`, downloaded once and
 * sha256-verified before it is kept, loop-mounted read-only once at `<dir>/<artifactId>.mnt`
 * and shared by every sandbox of that template as its overlay's lower layer.
 */
export class ArtifactStore {
  private readonly known = new Map<string, ArtifactOnNode>();
  private readonly downloads = new Map<string, Promise<ArtifactOnNode>>();
  private readonly mounting = new Map<string, Promise<string>>();

  constructor(private readonly dir: string, private readonly logger: Logger, private readonly master?: MasterDownloads) {}

  async load(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    for (const name of await readdir(this.dir)) {
      if (name.includes('.part-')) { await rm(join(this.dir, name), { force: true }); continue; }
      if (!name.endsWith('.json')) continue;
      try {
        const a = JSON.parse(await readFile(join(this.dir, name), 'utf8')) as ArtifactOnNode;
        if (existsSync(a.path)) this.known.set(a.artifactId, a);
      } catch { /* a torn metadata file: the artifact is downloaded again on demand */ }
    }
    // Mounts of artifacts that are no longer here (their files were removed under them).
    for (const mp of await listMountPoints()) {
      if (mp.startsWith(this.dir + '/') && mp.endsWith('.mnt') && !this.known.has(mp.slice(this.dir.length + 1, -4))) {
        await unmount(mp).catch((err) => this.logger.warn({ err, mp }, 'stale artifact unmount failed'));
      }
    }
  }

  list(): ArtifactOnNode[] {
    return [...this.known.values()];
  }

  get(id: string): ArtifactOnNode | undefined {
    return this.known.get(id);
  }

  imagePath(id: string) { return join(this.dir, `${id}.ext4`); }
  mountDir(id: string) { return join(this.dir, `${id}.mnt`); }

  /** Present and verified, downloading it when missing; concurrent calls share one download. */
  async ensure(id: string, want: EnsureArtifact): Promise<ArtifactOnNode> {
    checkArtifactId(id);
    if (!/^[0-9a-f]{64}$/i.test(want.sha256 ?? '')) throw badRequest(`artifact ${id}: sha256 must be 64 hex digits`);
    if (typeof want.downloadUrl !== 'string' || !want.downloadUrl) throw badRequest(`artifact ${id}: downloadUrl is required`);
    const have = this.known.get(id);
    if (have) {
      if (have.sha256 !== want.sha256.toLowerCase()) {
        throw conflict(`artifact ${id} is on this node with sha256 ${have.sha256}, not ${want.sha256}`);
      }
      return have;
    }
    let p = this.downloads.get(id);
    if (!p) {
      p = this.download(id, want).finally(() => this.downloads.delete(id));
      this.downloads.set(id, p);
    }
    return p;
  }

  /** Loop-mounts the image read-only once; later calls return the same directory. */
  async mount(id: string): Promise<string> {
    const a = this.known.get(id);
    if (!a) throw notFound(`artifact ${id} is not on this node`);
    const dir = this.mountDir(id);
    let p = this.mounting.get(id);
    if (!p) {
      p = (async () => {
        if (await isMountPoint(dir)) return dir;
        await mkdir(dir, { recursive: true });
        // noload: never replay a journal on a shared read-only image.
        await run('mount', ['-t', 'ext4', '-o', 'loop,ro,noload', a.path, dir]);
        return dir;
      })().finally(() => this.mounting.delete(id));
      this.mounting.set(id, p);
    }
    return p;
  }

  /** Unmounts and deletes the artifact; the caller has checked that no sandbox uses it. */
  async remove(id: string): Promise<void> {
    checkArtifactId(id);
    const dir = this.mountDir(id);
    if (await isMountPoint(dir)) {
      const r = await run('umount', [dir], { allowFail: true });
      if (r.code !== 0) throw conflict(`artifact ${id} is still mounted and busy: ${r.stderr.trim()}`);
    }
    await rmdir(dir).catch(() => { /* never made, or already gone: nothing to remove */ });
    await rm(this.imagePath(id), { force: true });
    await rm(join(this.dir, `${id}.json`), { force: true });
    this.known.delete(id);
  }

  /** Unmounts every artifact no sandbox uses (agent shutdown). */
  async unmountAll(inUse: Set<string>): Promise<void> {
    for (const id of this.known.keys()) {
      if (inUse.has(id)) continue;
      const dir = this.mountDir(id);
      if (await isMountPoint(dir)) await unmount(dir).catch((err) => this.logger.warn({ err, id }, 'artifact unmount failed'));
    }
  }

  private async download(id: string, want: EnsureArtifact): Promise<ArtifactOnNode> {
    const started = Date.now();
    const path = this.imagePath(id);
    const part = `${path}.part-${randomBytes(4).toString('hex')}`;
    try {
      const got: { sha256: string; sizeBytes: number; linked?: boolean } = (want.localPath ? await this.linkVerified(id, want, part) : undefined)
        ?? await downloadVerified(`artifact ${id}`, want.downloadUrl, this.master, part, want);
      await chmod(part, 0o644);
      await rename(part, path);
      const a: ArtifactOnNode = { artifactId: id, sha256: got.sha256, sizeBytes: got.sizeBytes, path };
      await writeFile(join(this.dir, `${id}.json`), JSON.stringify(a));
      this.known.set(id, a);
      this.logger.info({ artifactId: id, bytes: got.sizeBytes, ms: Date.now() - started, linked: got.linked ?? false }, 'artifact downloaded');
      return a;
    } finally {
      await rm(part, { force: true });
    }
  }

  /**
   * The template center's own file, hard-linked when it is on this filesystem (one host, as in
   * `svc up`): 7 s of a 0.9 GB download through the master become the 2 s of hashing it
   * (docs/benchmarks.md, "First start"). Verified like a download; undefined, and the download
   * used, when it is elsewhere, not a plain file, or not what was asked for.
   */
  private async linkVerified(id: string, want: EnsureArtifact, part: string): Promise<{ sha256: string; sizeBytes: number; linked: true } | undefined> {
    const src = want.localPath!;
    const st = await lstat(src).catch(() => { /* not on this machine (the master's path on another host): downloaded instead */ return undefined; });
    if (!st?.isFile() || (want.sizeBytes && st.size !== want.sizeBytes)) return undefined;
    const linked = await link(src, part).then(() => true, (err: NodeJS.ErrnoException) => {
      // Another filesystem or host (EXDEV, ENOENT), or not ours to link (EPERM): the download does it.
      this.logger.debug({ artifactId: id, src, code: err.code }, 'artifact not linked; downloading it');
      return false;
    });
    if (!linked) return undefined;
    const got = await fileDigest(part);
    if (got.sha256 !== want.sha256.toLowerCase() || (want.sizeBytes && got.sizeBytes !== want.sizeBytes)) {
      this.logger.warn({ artifactId: id, src, sha256: got.sha256 }, 'the template center\'s file is not the artifact asked for; downloading it');
      await rm(part, { force: true });
      return undefined;
    }
    return { ...got, linked: true };
  }
}
