/**
 * t_svc_snapshot: a sandbox's captured files, a layer kept in the artifact store (the template
 * center's) and cached on the nodes that used it.
 */
export interface SnapshotRow {
  snapshot_id: string;
  /** A name the user gave it; unique, moved to the newest snapshot given the same name. */
  name: string | null;
  /** The name the capture asked for, while it is pending (the sweep that finishes it gives it); null once ready. */
  wanted_name: string | null;
  sandbox_id: string;
  /** The template the sandbox was made from, and its artifact the layer lies over. */
  template_id: string;
  artifact_id: string;
  layer_id: string;
  layer_sha256: string;
  size_bytes: number;
  /** The node that captured the layer (and keeps a copy of it). */
  node_id: string;
  /** 'pending' while the layer is on its node only, 'ready' once it is in the artifact store. */
  status: 'pending' | 'ready';
  /**
   * 'snapshot': a user's (listed); 'build': a template build's result, found by its cache_key;
   * 'pause': a paused sandbox's state, which another node resumes it from (docs/cluster.md).
   */
  purpose: 'snapshot' | 'build' | 'pause';
  /** A build's: the hash of its base and steps (docs/templates.md, "The build cache"). */
  cache_key: string | null;
  /** A build's: the build that captured it (its result, or a step's files for the cache). */
  build_id: string | null;
  /** JSON of the sandbox's volume mounts with their volume ids (docs/volumes.md); null: none. */
  volume_mounts: string | null;
  /** 'filesystem', or 'memory' (a microvm's whole machine: docs/runtimes.md). */
  contents: string;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  /** JSON of the environment its sandbox had. */
  env_vars: string;
  /** The team it belongs to (its sandbox's). */
  team_id: string;
  created_at: number;
  /**
   * While its layer is copied into the store: when a live master last vouched for the copy
   * (lease.ts); null before the first renewal. The sweeps that finish or drop pending rows go by
   * it, or by created_at where it is null, and leave created_at (a user's snapshot's listed time) alone.
   */
  lease_at: number | null;
}

export interface SnapshotTables {
  t_svc_snapshot: SnapshotRow;
}
