import { constants } from 'node:fs';
import { chmod, copyFile, mkdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ArtifactStored } from '@svc/contracts/template-center';
import type { ArtifactLocation, ArtifactStore } from './artifact-store.ts';
import { whenMissing } from '@svc/common';

/**
 * Artifacts as files: `<dir>/<artifactId>.ext4` (a snapshot layer's tar too) plus `<artifactId>.json` (its ArtifactStored
 * record, written last, so an artifact without its record is not served). New images are
 * written under `<dir>/.tmp` on the same filesystem and renamed into place.
 */
export class LocalArtifactStore implements ArtifactStore {
  readonly kind = 'local' as const;
  readonly scratchDir: string;

  constructor(readonly dir: string) {
    this.scratchDir = join(dir, '.tmp');
  }

  async init(): Promise<void> {
    // 0700, an existing one too: it holds pause packages (a sandbox's whole memory) and private
    // images; the node agents fetch from it over HTTP, and the template center runs as root.
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700).catch((err: Error) => {
      // A directory it may not change (another owner, a root-squashed mount): the store still works.
      process.emitWarning(`the template center's store ${this.dir} could not be made 0700 (${err.message}): other users of the host may read pause packages in it`);
    });
    // Leftovers of a process that died mid-build.
    await rm(this.scratchDir, { recursive: true, force: true });
    await mkdir(this.scratchDir, { recursive: true, mode: 0o700 });
  }

  async ready(): Promise<boolean> {
    return stat(this.dir).then((s) => s.isDirectory(), whenMissing(false));
  }

  async put(artifactId: string, file: string, meta: { sha256: string; sizeBytes: number }, opts: { move: boolean }): Promise<ArtifactStored> {
    const dataPath = this.dataPath(artifactId);
    if (opts.move) {
      await rename(file, dataPath).catch(async (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EXDEV') throw err;
        await this.copyIn(file, dataPath);
        await unlink(file);
      });
    } else {
      await this.copyIn(file, dataPath);
    }
    const record: ArtifactStored = { artifactId, sha256: meta.sha256, sizeBytes: meta.sizeBytes, storage: 'local', location: dataPath };
    const tmp = join(this.scratchDir, `${artifactId}.json.${process.pid}`);
    await writeFile(tmp, JSON.stringify(record));
    await rename(tmp, this.recordPath(artifactId));
    return record;
  }

  async delete(artifactId: string): Promise<boolean> {
    const existed = await Promise.all([this.recordPath(artifactId), this.dataPath(artifactId)].map((p) =>
      rm(p).then(() => true, (err: NodeJS.ErrnoException) => { if (err.code === 'ENOENT') return false; throw err; })));
    return existed.some(Boolean);
  }

  async locate(artifactId: string): Promise<ArtifactLocation | null> {
    const found = await this.find(artifactId);
    if (!found) return null;
    return { kind: 'file', path: this.dataPath(artifactId), sha256: found.record.sha256, sizeBytes: found.size };
  }

  async get(artifactId: string): Promise<ArtifactStored | null> {
    return (await this.find(artifactId))?.record ?? null;
  }

  /** The record and the data's size, when both are there. */
  private async find(artifactId: string): Promise<{ record: ArtifactStored; size: number } | null> {
    // Written by rename (put), so a record is whole or absent; an unreadable one is an error, not a miss.
    const text = await readFile(this.recordPath(artifactId), 'utf8').catch(whenMissing(null));
    if (text === null) return null;
    let record: ArtifactStored;
    try {
      record = JSON.parse(text) as ArtifactStored;
    } catch {
      throw new Error(`the local artifact store's record of ${artifactId} (${this.recordPath(artifactId)}) is not valid JSON`);
    }
    const st = await stat(this.dataPath(artifactId)).catch(whenMissing(null));
    return st ? { record, size: st.size } : null;
  }

  private async copyIn(from: string, to: string) {
    const tmp = join(this.scratchDir, `${to.split('/').pop()}.copy.${process.pid}`);
    try {
      await copyFile(from, tmp, constants.COPYFILE_FICLONE);
      await rename(tmp, to);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  private dataPath(id: string) { return join(this.dir, `${id}.ext4`); }
  private recordPath(id: string) { return join(this.dir, `${id}.json`); }
}
