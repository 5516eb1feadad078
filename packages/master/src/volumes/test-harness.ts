/**
 * For the volume service's tests: a migrated database, nodes whose lists the test sets, and
 * controller plugins the test steers (a Destroy held at a gate, a Create that takes its time).
 */
import pino from 'pino';
import { randomId, type DatabaseConfig, type Logger } from '@svc/common';
import type { NodeVolumeAttachment, VolumeControllerHooks } from '@svc/contracts/volumes';
import type { Kysely } from 'kysely';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import type { Database } from '../db/schema.ts';
import { migrations } from '../migrations/index.ts';
import { VolumeRepo } from './repo.ts';
import type { ControllerPlugins, UnreachableHolder, VolumeNodes } from './ports.ts';

export interface FakeNodes extends VolumeNodes {
  /** What each live node lists (a node is live while it has an entry). */
  held: Map<string, NodeVolumeAttachment[]>;
  /** Sandboxes on nodes that do not answer, by volume id. */
  away: Map<string, UnreachableHolder[]>;
}

export function fakeNodes(): FakeNodes {
  const held = new Map<string, NodeVolumeAttachment[]>();
  const away = new Map<string, UnreachableHolder[]>();
  return {
    held, away,
    live: async () => [...held.keys()].map((nodeId) => ({ nodeId, baseUrl: `http://${nodeId}.invalid`, headers: {} })),
    attachments: async (nodeId) => held.get(nodeId) ?? [],
    unreachableHolders: async (v) => away.get(v.volumeId) ?? [],
  };
}

/** A node's list entry for a volume held by a sandbox. */
export function holding(volumeId: string, sandboxId = 'sb-1'): NodeVolumeAttachment {
  return { volumeId, driver: 'steered', hostPath: '/base/x', refCount: 1, holders: [sandboxId] };
}

/** A plugin under the test's control: each hook runs the test's function, if it set one. */
export interface SteeredPlugin extends ControllerPlugins {
  hooks: {
    create?: VolumeControllerHooks['create'];
    destroy?: VolumeControllerHooks['destroy'];
  };
  destroyed: string[];
}

export function steeredPlugin(): SteeredPlugin {
  const p: SteeredPlugin = {
    hooks: {},
    destroyed: [],
    defaultDriver: () => 'steered',
    controller: () => ({
      create: async (input) => (p.hooks.create ? p.hooks.create(input) : { token: `tok_${randomId(24)}`, privateData: '' }),
      destroy: async (input) => {
        if (p.hooks.destroy) await p.hooks.destroy(input);
        p.destroyed.push(input.volumeId);
      },
    }),
  };
  return p;
}

/** A logger that keeps every line it is given, as parsed JSON (`msg` and the fields). */
export function recordingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, logger: pino({ level: 'debug' }, { write: (line: string) => { lines.push(JSON.parse(line) as Record<string, unknown>); } }) };
}

export async function volumeDatabase(config: DatabaseConfig): Promise<{ db: Kysely<Database>; repo: VolumeRepo; close(): Promise<void> }> {
  const db = await openDatabase(config);
  await migrate(db.kysely, db.driver, migrations);
  return { db: db.kysely, repo: new VolumeRepo(db.kysely), close: () => db.close() };
}
