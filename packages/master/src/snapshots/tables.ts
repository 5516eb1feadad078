/** t_svc_snapshot: a sandbox's captured files, kept as a layer on the node that took it. */
export interface SnapshotRow {
  snapshot_id: string;
  /** A name the user gave it; unique, moved to the newest snapshot given the same name. */
  name: string | null;
  sandbox_id: string;
  /** The template the sandbox was made from, and its artifact the layer lies over. */
  template_id: string;
  artifact_id: string;
  layer_id: string;
  layer_sha256: string;
  size_bytes: number;
  /** The node that keeps the layer (creates from the snapshot run there). */
  node_id: string;
  /** 'filesystem'; runtimes that capture memory add kinds (the microVM issue). */
  contents: string;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  /** JSON of the environment its sandbox had. */
  env_vars: string;
  created_at: number;
}

export interface SnapshotTables {
  t_svc_snapshot: SnapshotRow;
}
