import type { Generated } from 'kysely';

/** Persistent volumes (docs/volumes.md). Data lives with the volume's plugin; this is the record. */
export interface VolumeRow {
  /** A UUID. */
  volume_id: string;
  team_id: string;
  /** Unique within a team (the id when the create named none). */
  name: string;
  /** The plugin that serves it (a `volume_plugins[].name`). */
  driver: string;
  /** The plugin's token ('' when it gave none): the volume content API accepts it as a bearer token. */
  token: string;
  /** The plugin's opaque state, passed to Attach; never returned to clients. */
  private_data: string;
  /** Nodes that hold it attached (docs/volumes.md "Lifecycle and counts"). */
  refcount: number;
  created_at: number;
  /**
   * When a DELETE began (epoch ms); null: usable. A volume being deleted, or whose Destroy failed,
   * is mounted, resumed and served to no one; a DELETE again finishes it (docs/volumes.md).
   */
  deleting_at: number | null;
  /**
   * Attaches under way: creates, resumes, moves and content calls that read the volume and have
   * not yet heard their node's answer. A DELETE refuses while any is (deletion.ts).
   */
  attach_claims: Generated<number>;
  /** Until when `attach_claims` counts (epoch ms): the claims of a master that died lapse then. */
  attach_claims_until: number | null;
}

export interface VolumeTables {
  t_svc_volume: VolumeRow;
}
