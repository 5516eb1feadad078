/**
 * Row types of the master's tables. Booleans are stored as 0/1 and times as epoch milliseconds,
 * the same on SQLite, PostgreSQL and MySQL. Each feature module owns its tables' types.
 */
import type { TemplateTables } from '../templates/tables.ts';
import type { SnapshotTables } from '../snapshots/tables.ts';
import type { BuildTables } from '../builds/tables.ts';
import type { IdentityTables } from '../identity/tables.ts';
import type { TeamTables } from '../teams/tables.ts';
import type { SecretTables } from '../secrets/tables.ts';
import type { VolumeTables } from '../volumes/tables.ts';
import type { EventTables } from '../events/tables.ts';
import type { MetricsHistoryTables } from '../metrics-history/tables.ts';

export interface SandboxRow {
  sandbox_id: string;
  template_id: string;
  alias: string | null;
  node_id: string;
  state: string;
  pause_kind: string | null;
  address: string;
  envd_port: number;
  envd_version: string;
  envd_access_token: string | null;
  traffic_access_token: string | null;
  secure: number;
  runtime: string;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  metadata: string;
  network: string;
  allow_internet_access: number | null;
  on_timeout: string;
  auto_resume: number;
  /** -1 never, 0 immediate, N idle seconds */
  timeout_sec: number;
  end_at: number | null;
  started_at: number;
  created_at: number;
  updated_at: number;
  terminated_at: number | null;
  terminate_reason: string | null;
  volume_mounts: string;
  /** JSON of the environment the sandbox was created with (null: created before snapshots). */
  env_vars: string | null;
  /** 1: the idle-timeout pause keeps memory (freeze); 0: it keeps only the files. */
  auto_pause_memory: number;
  /** The team it belongs to (docs/security.md). */
  team_id: string;
  /** E2B's iam.tokens JSON ({name: {audience, tokenType}}); null: none. */
  iam: string | null;
  /** A paused sandbox's state in the artifact store (t_svc_snapshot, purpose 'pause'); null: on its node only. */
  pause_snapshot_id: string | null;
  /** JSON of the create's nodeSelector; null: none (a move to another node keeps to it). */
  node_selector: string | null;
}

export interface NodeRow {
  node_id: string;
  address: string;
  runtime: string;
  pause_kinds: string;
  capacity: string;
  release_ratio: number;
  status: string;
  labels: string;
  labels_version: number;
  usage: string;
  version: string;
  registered_at: number;
  last_heartbeat_at: number;
  egress_admin_url: string | null;
  /** JSON list of NodeInfo.features; null: an agent older than them. */
  features: string | null;
  /** JSON list of NodeInfo.runtimes (the default first); null: an agent older than them, which offers `runtime` alone. */
  runtimes: string | null;
}

interface MigrationRow {
  name: string;
  fingerprint: string;
  applied_at: number;
}

export interface Database extends TemplateTables, SnapshotTables, BuildTables, TeamTables, IdentityTables, SecretTables, VolumeTables, EventTables, MetricsHistoryTables {
  t_svc_sandbox: SandboxRow;
  t_svc_node: NodeRow;
  t_svc_migration: MigrationRow;
}
