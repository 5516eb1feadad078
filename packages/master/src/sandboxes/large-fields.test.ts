/**
 * A create as large as its limits allow (create-input.ts, SANDBOX_LIMITS) is recorded and read
 * back whole on every engine. On MySQL these JSON columns were `text` (65,535 bytes) until
 * 20261205090000_mysql_long_json: a create that passed its checks started on a node, then its
 * insert failed ("Data too long") and the caller got a 503.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger, type Logger } from '@svc/common';
import type { VolumeMount } from '@svc/contracts/master';
import { SANDBOX_LIMITS } from '@svc/contracts/master';
import { availableTestDatabases } from '../db/test-databases.ts';
import { NodeEgressPolicies } from '../egress-policies.ts';
import { EventRepo } from '../events/event-repo.ts';
import { EventRecorder } from '../events/recorder.ts';
import { WebhookRepo } from '../events/webhook-repo.ts';
import { checkCreateInput } from './create-input.ts';
import type { SandboxVolumes } from './ports.ts';
import { SandboxRepo } from './repo.ts';
import { MasterSandboxes } from './service.ts';
import { setup, templates } from './service-test-support.ts';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/** `n` bytes of text in which every 8th character is one JSON escapes (to 6 bytes: `\u0001`) or doubles (`"`, `\`). */
function escapeHeavy(n: number, seed: number): string {
  const odd = ['\u0001', '"', '\\', '\n'];
  let s = '';
  for (let i = 0; s.length < n; i++) s += i % 8 === 7 ? odd[(i + seed) % odd.length] : String.fromCharCode(97 + ((i + seed) % 26));
  return s;
}

/** Metadata just under metadataTotalBytes, each value at metadataValueBytes at most. */
function bigMetadata(): Record<string, string> {
  const out: Record<string, string> = {};
  let total = 0;
  for (let i = 0; ; i++) {
    const key = `k${String(i).padStart(2, '0')}`;
    const room = SANDBOX_LIMITS.metadataTotalBytes - total - bytes(key);
    if (room <= 0) break;
    const value = escapeHeavy(Math.min(SANDBOX_LIMITS.metadataValueBytes, room), i);
    out[key] = value;
    total += bytes(key) + bytes(value);
  }
  return out;
}

/** 200 KB of environment, each value at envVarValueBytes at most. */
function bigEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < 4; i++) out[`VAR_${i}`] = escapeHeavy(50 * 1024, i);
  return out;
}

/** allowOut and denyOut of their most entries, each a long IPv6 address (host names are capped apart). */
function bigNetwork() {
  const addr = (list: number, i: number) => `2001:0db8:${list.toString(16).padStart(4, '0')}:0000:0000:0000:0000:${i.toString(16).padStart(4, '0')}/128`;
  return {
    allowOut: Array.from({ length: SANDBOX_LIMITS.networkListEntries }, (_, i) => addr(1, i)),
    denyOut: Array.from({ length: SANDBOX_LIMITS.networkListEntries }, (_, i) => addr(2, i)),
  };
}

/** Mounts of their most count, each with a long path (a volume of every name is there). */
function bigMounts(): VolumeMount[] {
  return Array.from({ length: SANDBOX_LIMITS.volumeMounts }, (_, i) => ({
    name: `vol${i}`, path: `/mnt/${i}/${Array.from({ length: 15 }, () => 'd'.repeat(250)).join('/')}`, readOnly: false,
  }));
}

const volumes: SandboxVolumes = {
  async resolveMounts(_teamId, mounts) {
    return mounts.map((m) => ({ mount: { ...m, volumeId: `id-${m.name}` }, onNode: { volumeId: `id-${m.name}`, driver: 'local', privateData: '', path: m.path, readOnly: m.readOnly } }));
  },
  async current(recorded) {
    return recorded.map((m) => ({ volumeId: m.volumeId!, driver: 'local', privateData: '', path: m.path, readOnly: m.readOnly }));
  },
  async applyFlips() {},
  whileAttaching: (_ids, attach) => attach(),
};

for (const tdb of availableTestDatabases()) {
  test(`a create at its size limits on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    // The event recorder never throws (a lost event is logged): its errors are collected here.
    const lost: unknown[] = [];
    const logger = silentLogger();
    logger.error = ((...args: unknown[]) => { lost.push(args); }) as Logger['error'];
    const events = new EventRepo(h.db.kysely);
    const svc = new MasterSandboxes({
      cfg: h.cfg, repo: new SandboxRepo(h.db.kysely, h.db.driver), nodes: h.nodes, templates, coordination: h.coordination, logger: silentLogger(),
      proxies: { purge: async () => {} }, egress: new NodeEgressPolicies(h.nodes, '', silentLogger()), volumes,
      events: new EventRecorder({ events, webhooks: new WebhookRepo(h.db.kysely), logger }),
    });
    try {
      await t.test('env vars, metadata, network and mounts past 64 KiB each are recorded and read back intact', async () => {
        const body = { template: 'base', envVars: bigEnv(), metadata: bigMetadata(), network: bigNetwork(), volumeMounts: bigMounts() };
        const input = checkCreateInput(body);
        for (const [field, value] of Object.entries({ envVars: input.envVars, metadata: input.metadata, network: input.network, volumeMounts: input.volumeMounts })) {
          assert.ok(bytes(JSON.stringify(value)) > 65_535, `${field} is past MySQL's text as JSON (${bytes(JSON.stringify(value))} bytes)`);
        }
        const s = await svc.create(input);
        assert.equal(s.state, 'running');
        const got = await svc.get(s.sandboxId);
        assert.deepEqual(got.metadata, body.metadata);
        assert.deepEqual([got.network.allowOut, got.network.denyOut], [body.network.allowOut, body.network.denyOut]);
        assert.deepEqual(got.volumeMounts, body.volumeMounts);
        const row = await h.db.kysely.selectFrom('t_svc_sandbox').select(['env_vars', 'metadata', 'network', 'volume_mounts']).where('sandbox_id', '=', s.sandboxId).executeTakeFirstOrThrow();
        assert.deepEqual(JSON.parse(row.env_vars!), body.envVars);
        assert.deepEqual((JSON.parse(row.volume_mounts) as VolumeMount[]).map((m) => m.path), body.volumeMounts.map((m) => m.path));
        // The lifecycle events carry the metadata (E2B's sandbox_metadata), escaped once more.
        await svc.kill(s.sandboxId);
        assert.deepEqual(lost, [], 'no lifecycle event was lost');
        const kept = await events.list(got.teamId, { sandboxId: s.sandboxId, offset: 0, limit: 10, asc: true });
        assert.deepEqual(kept.map((e) => e.type), ['sandbox.lifecycle.created', 'sandbox.lifecycle.killed']);
        for (const e of kept) assert.deepEqual((JSON.parse(e.event_data!) as { sandbox_metadata: unknown }).sandbox_metadata, body.metadata);
      });
    } finally {
      await h.close();
      await made.drop();
    }
  });
}
