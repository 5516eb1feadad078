import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@svc/common';
import { availableTestDatabases } from '../db/test-databases.ts';
import type { SandboxRow } from '../db/schema.ts';
import { NodeRegistry } from '../nodes/registry.ts';
import { volumeNodesOf } from './nodes.ts';
import { volumeDatabase } from './test-harness.ts';

const TEAM = 'team-n';
const VOLUME = { volumeId: '6f0c2a8e-0000-4000-8000-00000000abcd', name: 'work', teamId: TEAM };

function sandbox(id: string, nodeId: string, o: Partial<SandboxRow> = {}): SandboxRow {
  return {
    sandbox_id: id, template_id: 'base', alias: null, node_id: nodeId, state: 'running', pause_kind: null, address: '10.0.0.2',
    envd_port: 49983, envd_version: '0.1.0', envd_access_token: null, traffic_access_token: null, secure: 0, runtime: 'gvisor',
    cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, metadata: '{}', network: '{}', allow_internet_access: null, on_timeout: 'kill',
    auto_resume: 0, timeout_sec: 300, end_at: null, started_at: 1, created_at: 1, updated_at: 1, terminated_at: null, terminate_reason: null,
    volume_mounts: JSON.stringify([{ name: VOLUME.name, path: '/mnt', readOnly: false, volumeId: VOLUME.volumeId }]), env_vars: null,
    auto_pause_memory: 1, team_id: TEAM, iam: null, pause_snapshot_id: null, node_selector: null, ...o,
  };
}

for (const engine of availableTestDatabases()) {
  test(`the volume holders the nodes cannot tell on ${engine.driver}: the team's sandboxes that mount it on nodes that do not answer`, { skip: engine.skip }, async () => {
    const tdb = await engine.create!();
    const vdb = await volumeDatabase(tdb.config);
    try {
      const registry = new NodeRegistry(vdb.db);
      const node = (nodeId: string, features: string[]) => registry.register({
        nodeId, address: 'http://127.0.0.1:9', runtime: 'gvisor', pauseKinds: [], capacity: { cpuCount: 1, memoryMB: 1024 }, pausedResourceReleaseRatio: 0, version: 't', features,
      });
      await node('n-live', ['volumes']);
      await node('n-gone', ['volumes']);
      await node('n-old', []);
      await vdb.db.updateTable('t_svc_node').set({ last_heartbeat_at: 0 }).where('node_id', 'in', ['n-gone', 'n-old']).execute();
      await vdb.db.insertInto('t_svc_sandbox').values([
        sandbox('sb-live', 'n-live'),
        sandbox('sb-gone', 'n-gone'),
        sandbox('sb-paused', 'n-gone', { state: 'paused', pause_kind: 'freeze' }),
        sandbox('sb-ended', 'n-gone', { state: 'terminated', terminated_at: 2, terminate_reason: 'node_lost' }),
        sandbox('sb-other-volume', 'n-gone', { volume_mounts: JSON.stringify([{ name: 'x', path: '/x', readOnly: false, volumeId: 'other' }]) }),
        sandbox('sb-other-team', 'n-gone', { team_id: 'team-other' }),
        sandbox('sb-by-name', 'n-gone', { volume_mounts: JSON.stringify([{ name: VOLUME.name, path: '/mnt', readOnly: false }]) }),
        sandbox('sb-old-agent', 'n-old'),
      ]).execute();
      const found = await volumeNodesOf(registry, vdb.db, silentLogger()).unreachableHolders(VOLUME);
      assert.deepEqual(found.map((h) => h.sandboxId).sort(), ['sb-by-name', 'sb-gone', 'sb-paused']);
      assert.ok(found.every((h) => h.nodeId === 'n-gone'));
    } finally {
      await vdb.close();
      await tdb.drop();
    }
  });
}
