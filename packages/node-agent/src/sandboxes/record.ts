import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { PauseKind, RuntimeKind } from '@svc/contracts/node-agent';
import type { EgressPolicy } from '../network/egress-policy.ts';
import type { AttachedVolume } from '../volumes/attachments.ts';

/**
 * What the agent keeps on disk about one runtime instance, so that after a crash it can
 * adopt the instances that still run and remove the rest. Secrets (env values, the envd
 * token) are not kept here.
 */
export interface InstanceRecord {
  instanceId: string;
  /** warm: started ahead, not handed out yet. */
  role: 'sandbox' | 'warm';
  /** creating/destroying: an operation that a crash may have cut short. */
  phase: 'creating' | 'running' | 'paused' | 'destroying';
  sandboxId?: string;
  templateId: string;
  artifactId: string;
  runtime: RuntimeKind;
  slot: number;
  hostAddress: string;
  address: string;
  netns: string;
  hostVeth: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  policy: EgressPolicy;
  metadata: Record<string, string>;
  /** The template's USER and WORKDIR, given to envd's /init at every boot (CreateSandboxOnNode). */
  defaultUser?: string;
  defaultWorkdir?: string;
  envdVersion: string;
  /** The token envd was given at /init (secure sandboxes); the microvm driver's exec presents it. */
  envdAccessToken?: string;
  startedAt: string;
  fromWarmPool?: boolean;
  /** A warm instance whose runtime started it without running it (RuntimeDriver.create 'parked'); the hand-out runs it. */
  parked?: boolean;
  pauseKind?: PauseKind;
  pausedAt?: string;
  snapshotBytes?: number;
  /** The sandbox's volumes, mounted at boot (docs/volumes.md). */
  volumes?: AttachedVolume[];
  /** A filesystem pause detached them; the boot that resumes it attaches them again. */
  volumesDetached?: boolean;
}

/** Records under `<stateDir>/instances/<instanceId>/record.json`, replaced atomically. */
export class RecordStore {
  constructor(readonly root: string) {}

  dirOf(instanceId: string) { return join(this.root, instanceId); }

  async save(r: InstanceRecord): Promise<void> {
    const dir = this.dirOf(r.instanceId);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const tmp = join(dir, `.record.json.${randomBytes(4).toString('hex')}`);
    await writeFile(tmp, JSON.stringify(r, null, 1), { mode: 0o600 });
    await rename(tmp, join(dir, 'record.json'));
  }

  async remove(instanceId: string): Promise<void> {
    await rm(join(this.dirOf(instanceId), 'record.json'), { force: true });
  }

  /** Every readable record, plus the ids of instance directories without one. */
  async loadAll(): Promise<{ records: InstanceRecord[]; strayDirs: string[] }> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    const records: InstanceRecord[] = [];
    const strayDirs: string[] = [];
    for (const name of await readdir(this.root)) {
      try {
        records.push(JSON.parse(await readFile(join(this.root, name, 'record.json'), 'utf8')) as InstanceRecord);
      } catch {
        strayDirs.push(name);
      }
    }
    return { records, strayDirs };
  }
}
