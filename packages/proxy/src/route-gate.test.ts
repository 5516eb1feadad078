/**
 * The cold path's own rules, without a master: a purge that lands while a route is being fetched
 * wins over that route, a resume answered `paused` is asked again only after the settle poll
 * interval, and a kept paused route refuses a request without the token without asking the
 * master, and wakes the sandbox at once for one with it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import type { AutoResumer } from './auto-resumer.ts';
import { BackendCache } from './backend-cache.ts';
import { RouteGate } from './route-gate.ts';
import { SignedFileUrls } from './signed-file-urls.ts';

const route = (state: SandboxRoute['state']): SandboxRoute => ({ sandboxId: 'sb', state, nodeId: 'n', address: '10.0.0.2', envdPort: 49983, autoResume: true });
const presented = { trafficTokens: undefined, accessToken: undefined, method: 'GET', url: '/', upgrade: false };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A resumer whose answers the test gives, each after `before` ran. */
function resumer(answers: Array<() => Promise<SandboxRoute>>): { r: AutoResumer; calls: number[] } {
  const calls: number[] = [];
  return {
    calls,
    r: { resume: () => { calls.push(Date.now()); return answers.shift()!(); } } as unknown as AutoResumer,
  };
}

test('a purge while a resume is under way: the route the resume brings is not cached', async () => {
  const cache = new BackendCache(async () => route('paused'), 60_000);
  try {
    const { r } = resumer([async () => { cache.purge(['sb']); return route('running'); }]);
    const gate = new RouteGate(cache, r, { settleWaitMs: 1_000, settlePollMs: 10 });
    assert.equal((await gate.runningRoute('sb', 8080, presented)).state, 'running', 'the request itself is served');
    assert.equal(cache.fresh('sb'), undefined, 'the purge, newer than the resume\'s route, wins');
  } finally {
    cache.close();
  }
});

test('a resume answered `paused` is asked again only after the settle poll interval', async () => {
  const cache = new BackendCache(async () => route('paused'), 60_000);
  try {
    const { r, calls } = resumer([async () => route('paused'), async () => route('paused'), async () => route('running')]);
    const gate = new RouteGate(cache, r, { settleWaitMs: 2_000, settlePollMs: 100 });
    assert.equal((await gate.runningRoute('sb', 8080, presented)).state, 'running');
    assert.equal(calls.length, 3);
    for (let i = 1; i < calls.length; i++) assert.ok(calls[i] - calls[i - 1] >= 90, `resume ${i + 1} came ${calls[i] - calls[i - 1]} ms after the one before`);
  } finally {
    cache.close();
  }
});

test('a purge while a signed file URL is looked up: the route it brings is not cached', async () => {
  const cache = new BackendCache(async () => route('running'), 60_000);
  try {
    const urls = new SignedFileUrls(async () => { await sleep(5); cache.purge(['sb']); return route('running'); }, cache);
    assert.equal(await urls.sandboxOf('GET', '/files?path=/a&username=user&signature=v1_x'), 'sb');
    assert.equal(cache.fresh('sb'), undefined);
  } finally {
    cache.close();
  }
});

test('a kept paused route: refused without the token at no look-up, resumed at once with it', async () => {
  let lookups = 0;
  const secured = { ...route('paused'), trafficAccessToken: 'tt' };
  const cache = new BackendCache(async () => { lookups++; return secured; }, 60_000);
  try {
    const { r, calls } = resumer([async () => ({ ...secured, state: 'running' })]);
    const gate = new RouteGate(cache, r, { settleWaitMs: 1_000, settlePollMs: 500 });
    for (let i = 0; i < 20; i++) await assert.rejects(gate.runningRoute('sb', 8080, presented), (e: { status: number }) => e.status === 403);
    assert.equal(lookups, 1, 'one look-up for twenty refusals');
    assert.equal(calls.length, 0, 'nothing woke it');
    const started = Date.now();
    const served = await gate.runningRoute('sb', 8080, { ...presented, trafficTokens: ['tt'] });
    assert.equal(served.state, 'running');
    assert.equal(calls.length, 1, 'the kept paused route led to the resume');
    assert.ok(Date.now() - started < 400, `resumed in ${Date.now() - started} ms, without waiting a poll interval`);
    assert.equal(lookups, 1, 'and without asking the master first');
  } finally {
    cache.close();
  }
});
