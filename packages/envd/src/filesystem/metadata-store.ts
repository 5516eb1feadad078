import { mkdirSync, readFileSync, writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';

export interface FileIdentity {
  dev: bigint;
  ino: bigint;
  birthtimeNs: bigint;
}

interface Record {
  birth: string;
  metadata: { [key: string]: string };
}

/**
 * User metadata of uploaded files (`X-Metadata-*`). E2B's envd keeps it in `user.e2b.*` xattrs;
 * Node has no xattr calls, so envd keeps it itself, keyed by device and inode so it follows the
 * file through renames like an xattr would, and checked against the birth time so that a reused
 * inode does not inherit it. Saved to a small JSON file so an envd restart keeps it.
 */
export class MetadataStore {
  private readonly records = new Map<string, Record>();
  private saveTimer: NodeJS.Timeout | undefined;

  constructor(private readonly file: string | undefined) {
    if (!file) return;
    try {
      const saved = JSON.parse(readFileSync(file, 'utf8')) as { [key: string]: Record };
      for (const [key, record] of Object.entries(saved)) this.records.set(key, record);
    } catch {
      // nothing saved yet
    }
  }

  get(id: FileIdentity): { [key: string]: string } | undefined {
    const key = keyOf(id);
    const record = this.records.get(key);
    if (!record) return undefined;
    if (record.birth !== String(id.birthtimeNs)) {
      this.records.delete(key);
      this.scheduleSave();
      return undefined;
    }
    return record.metadata;
  }

  /** Replaces the file's metadata; an empty map clears it (as each upload does in E2B). */
  set(id: FileIdentity, metadata: { [key: string]: string } | undefined): void {
    const key = keyOf(id);
    const had = this.records.has(key);
    if (!metadata || Object.keys(metadata).length === 0) this.records.delete(key);
    else this.records.set(key, { birth: String(id.birthtimeNs), metadata: { ...metadata } });
    if (had || metadata) this.scheduleSave();
  }

  delete(id: FileIdentity): void {
    if (this.records.delete(keyOf(id))) this.scheduleSave();
  }

  private scheduleSave(): void {
    if (!this.file || this.saveTimer) return;
    this.saveTimer = setTimeout(() => {
      this.saveTimer = undefined;
      this.save();
    }, 100);
    this.saveTimer.unref();
  }

  private save(): void {
    const file = this.file!;
    try {
      mkdirSync(join(file, '..'), { recursive: true, mode: 0o700 });
      const tmp = `${file}.tmp`;
      writeFileSync(tmp, JSON.stringify(Object.fromEntries(this.records)), { mode: 0o600 });
      renameSync(tmp, file);
    } catch {
      // best effort: metadata stays in memory
    }
  }
}

function keyOf(id: FileIdentity): string {
  return `${id.dev}:${id.ino}`;
}
