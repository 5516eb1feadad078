import type { Migration } from '../db/migrator.ts';
import { migration as m20261122100000 } from './20261122100000_sandboxes_and_nodes.ts';
import { migration as m20261122110000 } from './20261122110000_templates.ts';
import { migration as m20261125120000 } from './20261125120000_snapshots.ts';
import { migration as m20261125130000 } from './20261125130000_pause_memory.ts';
import { migration as m20261126100000 } from './20261126100000_snapshot_store.ts';
import { migration as m20261126110000 } from './20261126110000_template_builds.ts';
import { migration as m20261126120000 } from './20261126120000_template_tags.ts';
import { migration as m20261126130000 } from './20261126130000_build_step_cache.ts';
import { migration as m20261127100000 } from './20261127100000_node_egress.ts';
import { migration as m20261128090000 } from './20261128090000_teams.ts';
import { migration as m20261128100000 } from './20261128100000_identity_keys.ts';
import { migration as m20261128110000 } from './20261128110000_secrets.ts';
import { migration as m20261129090000 } from './20261129090000_volumes.ts';
import { migration as m20261129100000 } from './20261129100000_snapshot_volumes.ts';
import { migration as m20261130090000 } from './20261130090000_runtimes.ts';
import { migration as m20261201090000 } from './20261201090000_pause_packages.ts';
import { migration as m20261201100000 } from './20261201100000_node_selector.ts';
import { migration as m20261202090000 } from './20261202090000_events.ts';
import { migration as m20261202100000 } from './20261202100000_metrics_history.ts';
import { migration as m20261204090000 } from './20261204090000_snapshot_wanted_name.ts';
import { migration as m20261203090000 } from './20261203090000_build_files.ts';
import { migration as m20261205090000 } from './20261205090000_mysql_long_json.ts';
import { migration as m20261205100000 } from './20261205100000_mysql_exact_names.ts';
import { migration as m20261206090000 } from './20261206090000_volume_deleting.ts';
import { migration as m20261207090000 } from './20261207090000_volume_attach_claims.ts';

/** Every migration the master knows; order here does not matter, names decide. */
export const migrations: Migration[] = [m20261122100000, m20261122110000, m20261125120000, m20261125130000, m20261126100000, m20261126110000, m20261126120000, m20261126130000, m20261127100000, m20261128090000, m20261128100000, m20261128110000, m20261129090000, m20261129100000, m20261130090000, m20261201090000, m20261201100000, m20261202090000, m20261202100000, m20261203090000, m20261204090000, m20261205090000, m20261205100000, m20261206090000, m20261207090000];
