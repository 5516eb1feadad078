/**
 * The sandbox state machine (docs/design.md, "Sandbox states"): every move of the table is made
 * and announced as the table says, every move it lacks writes nothing, on each database engine;
 * the table in docs/design.md is the one in state-table.ts; and nothing but transitions.ts
 * writes a sandbox's state.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryCoordination, SvcError, silentLogger } from '@svc/common';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent } from '@svc/contracts/lifecycle';
import type { SandboxState } from '@svc/contracts/master-internal';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import type { SandboxRow } from '../db/schema.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { SandboxRepo, type SandboxPatch } from './repo.ts';
import { isLegal, STATE_TABLE, type Trigger } from './state-table.ts';
import { SandboxTransitions } from './transitions.ts';

const STATES: SandboxState[] = ['running', 'pausing', 'paused', 'resuming', 'killing', 'terminated'];
const TRIGGERS = [...new Set(STATE_TABLE.map((m) => m.trigger))].filter((t) => t !== 'create') as Trigger[];

function rowIn(id: string, state: string): SandboxRow {
  const now = Date.now();
  return {
    sandbox_id: id, template_id: 'tpl-1', alias: null, node_id: 'n1', state, pause_kind: null,
    address: '10.0.0.2', envd_port: 49983, envd_version: '0', envd_access_token: null, traffic_access_token: null, secure: 0,
    runtime: 'gvisor', cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, metadata: '{}', network: '{}', allow_internet_access: null,
    on_timeout: 'kill', auto_resume: 0, timeout_sec: 300, end_at: now + 300_000, started_at: now, created_at: now, updated_at: now,
    terminated_at: null, terminate_reason: null, volume_mounts: '[]', env_vars: null, auto_pause_memory: 1, team_id: DEFAULT_TEAM_ID,
    iam: null, pause_snapshot_id: null, node_selector: null,
  };
}

for (const engine of availableTestDatabases()) {
  test(`sandbox transitions on ${engine.driver}`, { skip: engine.skip }, async (t) => {
    const tdb = await engine.create!();
    const db = await openDatabase(tdb.config);
    await migrate(db.kysely, db.driver, migrations);
    const repo = new SandboxRepo(db.kysely, db.driver);
    const coordination = new MemoryCoordination();
    const events: SandboxEvent[] = [];
    coordination.subscribe(SANDBOX_EVENTS_TOPIC, (e) => events.push(e as SandboxEvent));
    const purged: string[] = [];
    const transitions = new SandboxTransitions({ repo, coordination, proxies: { purge: async (ids) => { purged.push(...ids); } }, logger: silentLogger() });
    let n = 0;
    const put = async (state: string) => {
      const id = `sbx${engine.driver}${n++}`;
      await db.kysely.insertInto('t_svc_sandbox').values(rowIn(id, state)).execute();
      return id;
    };
    const settle = () => new Promise((r) => setTimeout(r, 5));
    try {
      await t.test('create records a running sandbox and announces it; any other first state is refused', async () => {
        events.length = 0;
        await transitions.create(rowIn('sbxcreated', 'running'));
        assert.equal((await repo.get('sbxcreated'))?.state, 'running');
        await settle();
        assert.deepEqual(events.map((e) => [e.kind, e.sandboxId]), [['sandbox.created', 'sbxcreated']]);
        await assert.rejects(transitions.create(rowIn('sbxbad', 'paused')), /created running/);
        assert.equal(await repo.get('sbxbad'), undefined);
      });

      await t.test('every move of the table is made, with its columns, and announces its event', async () => {
        for (const m of STATE_TABLE.filter((x) => x.from !== 'none')) {
          const id = await put(m.from);
          events.length = 0;
          purged.length = 0;
          const moved = await transitions.move(id, { trigger: m.trigger, from: [m.from as SandboxState], to: m.to, reason: 'api', patch: { address: '10.0.0.9' } });
          assert.ok(moved, `${m.from} --${m.trigger}--> ${m.to}`);
          const row = await repo.get(id);
          assert.equal(row?.state, m.to);
          assert.equal(row?.address, '10.0.0.9');
          await settle();
          assert.deepEqual(events.map((e) => [e.kind, e.reason]), m.event ? [[m.event, 'api']] : [], `${m.from} --${m.trigger}--> ${m.to}`);
          // A proxy forgets the sandbox's route on every announced change.
          assert.deepEqual(purged, m.event || m.purges ? [id] : []);
        }
      });

      await t.test('a move the table lacks writes nothing and announces nothing; mustMove is a 409 naming both states', async () => {
        let refused = 0;
        for (const from of STATES) {
          for (const trigger of TRIGGERS) {
            for (const to of new Set(STATE_TABLE.filter((m) => m.trigger === trigger).map((m) => m.to))) {
              if (isLegal(from, trigger, to)) continue;
              const id = await put(from);
              events.length = 0;
              const sure = { trigger, to, from: STATES.filter((s) => s !== 'terminated' && isLegal(s, trigger, to)).slice(0, 1) };
              assert.equal(await transitions.move(id, sure), false, `${from} --${trigger}--> ${to}`);
              assert.equal((await repo.get(id))?.state, from);
              const err = await transitions.mustMove(id, sure).then(() => undefined, (e: unknown) => e);
              assert.ok(err instanceof SvcError && err.status === 409, `${from} --${trigger}--> ${to}: ${String(err)}`);
              assert.match(err.message, new RegExp(`is ${from}; it cannot become ${to}`));
              await settle();
              assert.equal(events.length, 0);
              refused++;
            }
          }
        }
        assert.ok(refused > 40, `${refused} illegal moves tried`);
      });

      await t.test('a move narrowed to the state its caller read makes nothing from another', async () => {
        const id = await put('paused');
        assert.equal(await transitions.move(id, { trigger: 'kill', from: ['running'] }), false);
        assert.equal((await repo.get(id))?.state, 'paused');
        assert.equal(await transitions.move(id, { trigger: 'kill', from: ['paused'] }), true);
        assert.equal((await repo.get(id))?.state, 'killing');
      });

      await t.test('a trigger with two targets must name one; one whose event hangs on the state it leaves must name that', async () => {
        const id = await put('killing');
        await assert.rejects(transitions.move(id, { trigger: 'kill-failed' }), /more than one target/);
        assert.equal((await repo.get(id))?.state, 'killing');
        const settling = await put('resuming');
        await assert.rejects(transitions.move(settling, { trigger: 'settled', to: 'running' }), /name it in from/);
        assert.equal((await repo.get(settling))?.state, 'resuming');
      });
    } finally {
      await db.close();
      await tdb.drop();
    }
  });
}

test('docs/design.md prints the state table of state-table.ts', () => {
  const doc = readFileSync(join(import.meta.dirname, '../../../../docs/design.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Sandbox states'), doc.indexOf('\n## ', doc.indexOf('## Sandbox states') + 5));
  const rows = section.split('\n').filter((l) => /^\| `?(none|running|pausing|paused|resuming|killing)/.test(l))
    .map((l) => l.split('|').slice(1, -1).map((c) => c.trim().replace(/`/g, '')));
  const want = STATE_TABLE.map((m) => [m.from, m.trigger, m.condition, m.to, m.event ?? '']);
  assert.deepEqual(rows, want);
});

test('only transitions.ts writes a sandbox state', () => {
  const src = join(import.meta.dirname, '..');
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) { walk(p); continue; }
      if (!name.endsWith('.ts') || name.endsWith('.test.ts') || name === 'transitions.ts' || name === 'repo.ts') continue;
      const text = readFileSync(p, 'utf8');
      // The repository's state write, its insert of a sandbox, or a raw update of t_svc_sandbox's state.
      if (/\.writeState\(/.test(text) || (/sandboxes/.test(dir) && /repo\.insert\(/.test(text))
        || /updateTable\('t_svc_sandbox'\)[\s\S]{0,200}\bstate\b/.test(text)) offenders.push(p.slice(src.length + 1));
    }
  };
  walk(src);
  assert.deepEqual(offenders, []);
  // The other writes cannot carry a state: SandboxPatch forbids it.
  // @ts-expect-error a patch with a state does not type-check
  const patch: SandboxPatch = { state: 'running' };
  void patch;
});
