import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { PlatformAddresses } from '@svc/contracts/egress';
import { normalize, PlatformList } from './platform-list.ts';
import { testLogger } from '../testing/fixtures.ts';

let dir: string;
before(async () => { dir = await mkdtemp(join(tmpdir(), 'platform-list-')); });
after(async () => { await rm(dir, { recursive: true, force: true }); });

const LIST: PlatformAddresses = { endpoints: [{ ip: '10.0.0.6', port: 8088 }, { ip: '10.0.0.5', port: 8089 }, { ip: '10.0.0.6', port: 8088 }], pools: ['10.11.0.7/16'] };

test('normalize: sorted, without repeats, pools as network/prefix; a list with one bad entry is refused whole', () => {
  assert.deepEqual(normalize(LIST), { endpoints: [{ ip: '10.0.0.5', port: 8089 }, { ip: '10.0.0.6', port: 8088 }], pools: ['10.11.0.0/16'] });
  // master.platform_networks are dropped on every port, as the pools.
  assert.deepEqual(normalize({ ...LIST, networks: ['192.0.2.0/24'] }).pools, ['10.11.0.0/16', '192.0.2.0/24']);
  for (const bad of [
    { endpoints: [{ ip: 'node-b', port: 8088 }], pools: [] },
    { endpoints: [{ ip: '10.0.0.5', port: 0 }], pools: [] },
    { endpoints: [{ ip: '10.0.0.5', port: 70_000 }], pools: [] },
    { endpoints: [{ ip: '::1', port: 80 }], pools: [] },
    { endpoints: [], pools: ['10.0.0.0/33'] },
    { endpoints: [], pools: ['0.0.0.0/0'] },
    { endpoints: [], pools: [7] },
    { endpoints: 'all', pools: [] },
    { endpoints: [], pools: [], networks: '10.0.0.0/8' },
    { endpoints: [], pools: [], networks: ['10.0.0.0/4'] },
    null,
  ]) assert.throws(() => normalize(bad as unknown as PlatformAddresses), Error, JSON.stringify(bad));
});

test('the master\'s list is applied once while it stays the same, kept on disk, and used at the next start with the master down', async () => {
  const file = join(dir, 'kept.json');
  const applied: PlatformAddresses[] = [];
  const list = new PlatformList({ source: async () => LIST, file, apply: async (l) => { applied.push(l); }, logger: testLogger() });
  await list.start();
  await list.refresh();
  list.stop();
  assert.equal(applied.length, 1);
  assert.deepEqual(JSON.parse(await readFile(file, 'utf8')), normalize(LIST));

  const again: PlatformAddresses[] = [];
  const down = new PlatformList({ source: async () => { throw new Error('ECONNREFUSED'); }, file, apply: async (l) => { again.push(l); }, logger: testLogger(), readyWaitMs: 50 });
  await down.start();
  down.stop();
  assert.deepEqual(again, [normalize(LIST)]);
  await down.ready();
});

test('with a master and no list yet, ready() waits for the first and is a 503 after its wait; a bad list is not applied', async () => {
  const file = join(dir, 'none.json');
  let answer: () => Promise<PlatformAddresses> = async () => { throw new Error('ECONNREFUSED'); };
  const applied: PlatformAddresses[] = [];
  const list = new PlatformList({ source: () => answer(), file, apply: async (l) => { applied.push(l); }, logger: testLogger(), readyWaitMs: 100 });
  await list.start();
  await assert.rejects(list.ready(), (e: { status?: number; message?: string }) => e.status === 503 && /has not read the platform's addresses/.test(e.message ?? ''));
  answer = async () => ({ endpoints: [{ ip: '10.0.0.5', port: 0 }], pools: [] });
  await list.refresh();
  assert.equal(applied.length, 0, 'a list with a bad entry is not applied');
  const waiting = list.ready();
  answer = async () => LIST;
  await list.refresh();
  await waiting;
  list.stop();
  assert.equal(applied.length, 1);
});

test('without a master there is nothing to wait for', async () => {
  const list = new PlatformList({ file: join(dir, 'x.json'), apply: async () => { throw new Error('never applied'); }, logger: testLogger() });
  await list.start();
  await list.ready();
  list.stop();
});
