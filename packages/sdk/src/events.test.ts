import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { AuthenticationError, Events, InvalidArgumentError, SANDBOX_EVENT_TYPES, SandboxNotFoundError, type SandboxEvent } from './index.ts';
import { startFakeApi, type FakeApi } from './testing/fake-api.ts';

let api: FakeApi;
let conn: { apiUrl: string; apiKey: string };

before(async () => {
  api = await startFakeApi({ apiKey: 'k-ev' });
  conn = { apiUrl: api.url, apiKey: 'k-ev' };
});
after(() => api.close());
beforeEach(() => { api.events.events.length = 0; });

const lastRequest = () => api.requests[api.requests.length - 1]!;
const ids = (events: SandboxEvent[]) => events.map((e) => e.id);
const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms);

describe('Events.list', () => {
  test('the team\'s events, newest first; the query as the master reads it, types repeated', async () => {
    const a = api.events.record('sandbox.lifecycle.created', 'sbx-a', { at: at(0) });
    const b = api.events.record('sandbox.lifecycle.paused', 'sbx-a', { at: at(1000), data: { reason: 'api' } });
    const c = api.events.record('sandbox.lifecycle.killed', 'sbx-b', { at: at(2000) });

    assert.deepEqual(ids(await Events.list(conn)), [c.id, b.id, a.id]);
    assert.equal(lastRequest().url, '/events/sandboxes');
    assert.equal(lastRequest().headers['x-api-key'], 'k-ev');

    const page = await Events.list({ ...conn, offset: 1, limit: 1, orderAsc: true, types: ['sandbox.lifecycle.created', 'sandbox.lifecycle.paused'] });
    assert.equal(lastRequest().url, '/events/sandboxes?offset=1&limit=1&orderAsc=true&types=sandbox.lifecycle.created&types=sandbox.lifecycle.paused');
    assert.deepEqual(page, [b], 'the whole event, as the API answers it');
    assert.deepEqual(ids(await Events.list({ ...conn, types: ['sandbox.lifecycle.killed'] })), [c.id], 'a single type');
    assert.deepEqual(await Events.list({ ...conn, types: ['sandbox.lifecycle.snapshotted'] }), []);
  });

  test('one sandbox\'s; a sandbox the team does not have is a SandboxNotFoundError', async () => {
    api.events.record('sandbox.lifecycle.created', 'sbx-a', { at: at(0) });
    const killed = api.events.record('sandbox.lifecycle.killed', 'sbx-b', { at: at(1000) });
    assert.deepEqual(ids(await Events.list({ ...conn, sandboxId: 'sbx-b' })), [killed.id]);
    assert.equal(lastRequest().url, '/events/sandboxes/sbx-b');
    await assert.rejects(Events.list({ ...conn, sandboxId: 'a/b c', limit: 5 }), SandboxNotFoundError);
    assert.equal(lastRequest().url, '/events/sandboxes/a%2Fb%20c?limit=5', 'the id is one path segment');
    await assert.rejects(Events.list({ ...conn, sandboxId: 'sbx-nope' }), (e: unknown) => e instanceof SandboxNotFoundError && e.status === 404);
  });

  test('bad options are refused before any request', async () => {
    const sent = api.requests.length;
    const bad: Record<string, unknown>[] = [
      { limit: 0 }, { limit: 101 }, { limit: 1.5 }, { limit: '10' }, { offset: -1 }, { orderAsc: 'yes' },
      { types: ['sandbox.lifecycle.exploded'] }, { types: ['created'] }, { types: 'sandbox.lifecycle.created' }, { sandboxId: '' },
    ];
    for (const opts of bad) await assert.rejects(Events.list({ ...conn, ...opts } as never), InvalidArgumentError, JSON.stringify(opts));
    await assert.rejects(Events.list({ ...conn, types: ['nope' as never] }), /unknown event type "nope"; one of sandbox\.lifecycle\.created, /);
    assert.equal(api.requests.length, sent);
    assert.equal((await Events.list({ ...conn, limit: 100, offset: 0 })).length, 0, '100 is the largest page');
  });

  test('a wrong key is an AuthenticationError', async () => {
    await assert.rejects(Events.list({ ...conn, apiKey: 'wrong' }), AuthenticationError);
  });

  test('the types are the contract\'s', () => {
    assert.equal(SANDBOX_EVENT_TYPES.length, 6);
    assert.ok(SANDBOX_EVENT_TYPES.every((t) => t.startsWith('sandbox.lifecycle.')));
  });
});

/** Takes events from a follow until `n` have come, then aborts it and checks that it ends. */
async function take(events: AsyncGenerator<SandboxEvent, void, undefined>, n: number, abort: AbortController): Promise<SandboxEvent[]> {
  const got: SandboxEvent[] = [];
  if (n > 0) {
    for await (const e of events) {
      got.push(e);
      if (got.length === n) break;
    }
  }
  abort.abort();
  return got;
}

/** Whether a request to a URL starting with `prefix` came after the first `since`. */
const polledSince = (since: number, prefix: string) => api.requests.slice(since).some((r) => r.url.startsWith(prefix));

const waitFor = async (cond: () => boolean, what: string) => {
  for (const deadline = Date.now() + 5000; !cond();) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('Events.follow', () => {
  test('yields what happens after it starts, oldest first, each once; stops quietly when aborted', async () => {
    const old = api.events.record('sandbox.lifecycle.created', 'sbx-a', { at: new Date(Date.now() - 60_000) });
    const abort = new AbortController();
    const since = api.requests.length;
    const follow = Events.follow({ ...conn, pollIntervalMs: 10, signal: abort.signal });
    const got: SandboxEvent[] = [];
    const done = (async () => { for await (const e of follow) got.push(e); })();

    await waitFor(() => polledSince(since, '/events/sandboxes?'), 'the first poll');
    const t = Date.now();
    const first = api.events.record('sandbox.lifecycle.paused', 'sbx-a', { at: new Date(t) });
    const second = api.events.record('sandbox.lifecycle.resumed', 'sbx-a', { at: new Date(t + 1) });
    await waitFor(() => got.length >= 2, 'two events');
    // Shown by the list after a later one was: still yielded, once.
    const late = api.events.record('sandbox.lifecycle.updated', 'sbx-b', { at: new Date(t - 500) });
    await waitFor(() => got.length >= 3, 'the late event');
    const polls = api.requests.length;
    await waitFor(() => api.requests.length >= polls + 3, 'more polls');
    abort.abort();
    await done;

    assert.deepEqual(ids(got), [first.id, second.id, late.id], 'none of before it started, none twice');
    assert.ok(!ids(got).includes(old.id));
    const polled = api.requests.slice(since).filter((r) => r.url.startsWith('/events/sandboxes?')).map((r) => r.url);
    assert.ok(polled.every((u) => /[?&]orderAsc=false/.test(u)), 'newest first: the list\'s head is where the new events are');
    assert.equal(polled[0], '/events/sandboxes?offset=0&limit=10&orderAsc=false');
  });

  test('backlog: the latest events there are first; a burst larger than a page all comes, in order', async () => {
    const base = Date.now() - 10_000;
    const before = [0, 1, 2, 3].map((i) => api.events.record('sandbox.lifecycle.created', `sbx-${i}`, { at: new Date(base + i) }));
    const abort = new AbortController();
    const follow = Events.follow({ ...conn, backlog: 2, pollIntervalMs: 10, signal: abort.signal });
    const firstTwo = await follow.next().then(async (a) => [a.value, (await follow.next()).value] as SandboxEvent[]);
    assert.deepEqual(ids(firstTwo), ids(before.slice(2)));

    const burst = Array.from({ length: 250 }, (_, i) => api.events.record('sandbox.lifecycle.killed', `sbx-k${i}`, { at: new Date(base + 5000 + i * 10) }));
    const got = await take(follow, 250, abort);
    assert.deepEqual(ids(got), ids(burst));
    const pages = api.requests.filter((r) => r.url.includes('offset=10&limit=100') || r.url.includes('offset=110&limit=100'));
    assert.ok(pages.length >= 2, 'paged down past the first page');
  });

  test('a sandbox\'s events of some types; an unknown sandbox throws from the iteration', async () => {
    api.events.record('sandbox.lifecycle.created', 'sbx-f', { at: new Date(Date.now() - 1000) });
    const abort = new AbortController();
    const since = api.requests.length;
    const follow = Events.follow({ ...conn, sandboxId: 'sbx-f', types: ['sandbox.lifecycle.killed'], pollIntervalMs: 10, signal: abort.signal });
    const pending = take(follow, 1, abort);
    await waitFor(() => polledSince(since, '/events/sandboxes/sbx-f?'), 'a poll');
    api.events.record('sandbox.lifecycle.paused', 'sbx-f');
    const killed = api.events.record('sandbox.lifecycle.killed', 'sbx-f');
    assert.deepEqual(ids(await pending), [killed.id]);
    assert.match(lastRequest().url, /^\/events\/sandboxes\/sbx-f\?offset=0&limit=10&orderAsc=false&types=sandbox\.lifecycle\.killed$/);

    const missing = Events.follow({ ...conn, sandboxId: 'sbx-missing', pollIntervalMs: 10 });
    await assert.rejects(missing.next(), SandboxNotFoundError);
  });

  test('an abort before anything came ends it at once; bad options throw at the call, before any request', async () => {
    const abort = new AbortController();
    abort.abort();
    assert.deepEqual(await take(Events.follow({ ...conn, signal: abort.signal }), 1, abort), []);

    const sent = api.requests.length;
    const bad: Record<string, unknown>[] = [
      { backlog: -1 }, { backlog: 101 }, { pollIntervalMs: 0 }, { lateMs: -1 }, { types: ['x'] }, { sandboxId: '' },
    ];
    for (const opts of bad) assert.throws(() => Events.follow({ ...conn, ...opts } as never), InvalidArgumentError, JSON.stringify(opts));
    assert.equal(api.requests.length, sent);
  });
});
