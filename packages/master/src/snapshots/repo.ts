import type { Kysely, Selectable } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { SnapshotRow } from './tables.ts';

export type SnapshotDbRow = Selectable<SnapshotRow>;

/** Database access for t_svc_snapshot. */
export class SnapshotRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts a snapshot; a name it takes is first taken from the snapshot that had it. */
  async insert(row: SnapshotRow): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      if (row.name !== null) await tx.updateTable('t_svc_snapshot').set({ name: null }).where('name', '=', row.name).execute();
      await tx.insertInto('t_svc_snapshot').values(row).execute();
    });
  }

  /** By id, else by name. */
  async resolve(ref: string): Promise<SnapshotDbRow | undefined> {
    return (await this.db.selectFrom('t_svc_snapshot').selectAll().where('snapshot_id', '=', ref).executeTakeFirst())
      ?? this.db.selectFrom('t_svc_snapshot').selectAll().where('name', '=', ref).executeTakeFirst();
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('t_svc_snapshot').where('snapshot_id', '=', id).execute();
  }

  /** Newest first, keyset-paginated on (created_at, snapshot_id). */
  async list(opts: { sandboxId?: string; ref?: string; after?: { createdAt: number; id: string }; limit: number }): Promise<SnapshotDbRow[]> {
    let q = this.db.selectFrom('t_svc_snapshot').selectAll();
    if (opts.sandboxId) q = q.where('sandbox_id', '=', opts.sandboxId);
    if (opts.ref) {
      const ref = opts.ref;
      q = q.where((eb) => eb.or([eb('snapshot_id', '=', ref), eb('name', '=', ref)]));
    }
    if (opts.after) {
      const { createdAt, id } = opts.after;
      q = q.where((eb) => eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('snapshot_id', '<', id)])]));
    }
    return q.orderBy('created_at', 'desc').orderBy('snapshot_id', 'desc').limit(opts.limit).execute();
  }

  async layerIds(): Promise<Set<string>> {
    return new Set((await this.db.selectFrom('t_svc_snapshot').select('layer_id').execute()).map((r) => r.layer_id));
  }
}
