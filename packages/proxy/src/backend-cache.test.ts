/**
 * The route cache's answers for sandboxes the master does not know: one look-up per TTL, however
 * many requests ask; forgotten by a purge, by a new sandbox's announcement, and not kept when a
 * purge came during the look-up; and a bounded number of them. Which states are kept at all.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SvcError } from '@svc/common';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import { BackendCache } from './backend-cache.ts';

const route = (sandboxId: string): SandboxRoute => ({ sandboxId, state: 'running', nodeId: 'n', address: '10.0.0.2', envdPort: 49983, autoResume: true });

/** A master that knows the ids in `known`, counting its look-ups. */
function master(known: Set<string>) {
  const asked: string[] = [];
  const lookup = async (id: string) => {
    asked.push(id);
    if (!known.has(id)) throw new SvcError(404, `sandbox ${id} not found`);
    return route(id);
  };
  return { asked, lookup };
}

test('an unknown id costs one look-up per TTL, not one per request', async () => {
  const m = master(new Set());
  const cache = new BackendCache(m.lookup, 60_000);
  try {
    for (let i = 0; i < 500; i++) await assert.rejects(cache.load('nope'), (e: SvcError) => e.status === 404);
    assert.equal(m.asked.length, 1);
  } finally {
    cache.close();
  }
});

test('the 404 is forgotten after its TTL, by a purge of the id or of all, and by the announcement of a new sandbox of that id', async () => {
  const known = new Set<string>();
  const m = master(known);
  const cache = new BackendCache(m.lookup, 50);
  try {
    await assert.rejects(cache.load('sb'));
    await new Promise((r) => setTimeout(r, 60));
    await assert.rejects(cache.load('sb'));
    assert.equal(m.asked.length, 2, 'asked again after the TTL');
    cache.purge(['sb']);
    await assert.rejects(cache.load('sb'));
    assert.equal(m.asked.length, 3, 'asked again after a purge of the id');
    cache.purge();
    await assert.rejects(cache.load('sb'));
    assert.equal(m.asked.length, 4, 'asked again after a purge of all');
    known.add('sb');
    assert.equal((await cache.load('sb', true)).state, 'running', 'an announced sandbox is looked up whatever was answered before');
  } finally {
    cache.close();
  }
});

test('a 404 answered while a purge came is not kept; other failures are never kept', async () => {
  let purgeDuring = true;
  let fail: () => never = () => { throw new SvcError(404, 'gone'); };
  const asked: string[] = [];
  const cache: BackendCache = new BackendCache(async (id) => {
    asked.push(id);
    if (purgeDuring) cache.purge([id]);
    return fail();
  }, 60_000);
  try {
    await assert.rejects(cache.load('sb'));
    purgeDuring = false;
    await assert.rejects(cache.load('sb'));
    assert.equal(asked.length, 2, 'the first 404 raced a purge');
    fail = () => { throw new SvcError(503, 'master down'); };
    await assert.rejects(cache.load('other'));
    await assert.rejects(cache.load('other'));
    assert.equal(asked.length, 4, 'a 503 is asked again');
  } finally {
    cache.close();
  }
});

/** Each id here is unknown: the 404 is the answer expected, nothing else is. */
const unknown = (p: Promise<SandboxRoute>) => assert.rejects(p, (e: SvcError) => e.status === 404);

test('at most 10,000 unknown ids are kept, the oldest dropped first', async () => {
  const m = master(new Set());
  const cache = new BackendCache(m.lookup, 60_000);
  try {
    for (let i = 0; i <= 10_000; i++) await unknown(cache.load(`id-${i}`));
    assert.equal(m.asked.length, 10_001);
    await unknown(cache.load('id-10000'));
    assert.equal(m.asked.length, 10_001, 'the newest is still kept');
    await unknown(cache.load('id-0'));
    assert.equal(m.asked.length, 10_002, 'the oldest was dropped');
  } finally {
    cache.close();
  }
});

test('paused and killing routes are kept for the TTL like running and terminated ones; pausing and resuming are asked every time', async () => {
  const states = ['running', 'paused', 'killing', 'terminated', 'pausing', 'resuming'] as const;
  const asked: string[] = [];
  const cache = new BackendCache(async (id) => { asked.push(id); return { ...route(id), state: id as SandboxRoute['state'] }; }, 60_000);
  try {
    for (const state of states) {
      for (let i = 0; i < 5; i++) {
        const r = cache.fresh(state) ?? await cache.load(state);
        assert.equal(r.state, state);
      }
    }
    for (const state of ['running', 'paused', 'killing', 'terminated']) assert.equal(asked.filter((a) => a === state).length, 1, `${state}: one look-up`);
    for (const state of ['pausing', 'resuming']) assert.equal(asked.filter((a) => a === state).length, 5, `${state}: asked every time`);
    cache.purge(['paused']);
    assert.equal(cache.fresh('paused'), undefined, 'the master\'s purge (a resume, a kill) drops a kept paused route');
  } finally {
    cache.close();
  }
});
