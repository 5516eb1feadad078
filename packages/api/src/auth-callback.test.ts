/**
 * The operator's auth callback alone (api.auth_callback_url without api.api_key). Until the fix
 * every caller it allowed was the operator: it could make teams (and get their keys), list every
 * team's keys, see the nodes, and /svc/whoami said admin. Now such a caller is a team: the one
 * the callback's answer names in X-Svc-Team, else the default team, and the operator's routes
 * answer it 403 as they answer a team key.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { clusterHeaders } from '@svc/contracts/cluster-token';
import { DEFAULT_TEAM_ID, TeamsClient } from '@svc/contracts/teams';
import { CLUSTER_TOKEN, platform } from './testing/gateway-fixture.ts';

/**
 * A callback that allows `Bearer user-*` and names the team after `user-team-`; allows any
 * X-API-Key naming the default team; refuses the rest with 401.
 */
async function callbackServer() {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    const auth = req.headers.authorization ?? '';
    const team = /^Bearer user-team-(.+)$/.exec(auth)?.[1] ?? (req.headers['x-api-key'] ? DEFAULT_TEAM_ID : undefined);
    if (team) res.setHeader('X-Svc-Team', team);
    res.statusCode = auth.startsWith('Bearer user-') || req.headers['x-api-key'] ? 200 : 401;
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/auth`, seen, close: () => server.close() };
}

const as = (credential: string) => ({ authorization: `Bearer ${credential}` });

test('a caller the callback alone allowed is the default team without the operator\'s rights, or the team its answer names', async () => {
  const cb = await callbackServer();
  const p = await platform({ callback: cb.url, apiKey: '', maxFailedKeysPerMin: 3 });
  try {
    const operator = new TeamsClient(p.master.url, { headers: clusterHeaders(CLUSTER_TOKEN) });
    const other = (await operator.createTeam({ name: 'team-other' })).team.teamId;

    const who = await p.call('GET', '/svc/whoami', undefined, as('user-alice'));
    assert.equal(who.status, 200, JSON.stringify(who.body));
    assert.deepEqual({ teamId: who.body.teamId, admin: who.body.admin }, { teamId: DEFAULT_TEAM_ID, admin: false }, 'the default team, not the operator');
    for (const [method, path, body] of [
      ['POST', '/svc/teams', { name: 'grabbed' }], ['GET', '/nodes'], ['GET', '/admin/sandboxes/running-counts'], ['GET', '/metrics'],
      ['POST', `/admin/teams/${other}/api-keys`, {}], ['PATCH', `/svc/teams/${other}`, { limits: { maxSandboxes: 1 } }],
    ] as const) {
      assert.equal((await p.call(method, path, body, as('user-alice'))).status, 403, `${method} ${path} is the operator's`);
    }
    const keys = await p.call('GET', '/svc/keys', undefined, as('user-alice'));
    assert.ok(keys.body.every((k: { teamId: string }) => k.teamId === DEFAULT_TEAM_ID), `only the default team's keys: ${JSON.stringify(keys.body)}`);
    const teams = await p.call('GET', '/svc/teams', undefined, as('user-alice'));
    assert.deepEqual(teams.body.map((t: { teamId: string }) => t.teamId), [DEFAULT_TEAM_ID], 'only its own team');

    const named = await p.call('GET', '/svc/whoami', undefined, as(`user-team-${other}`));
    assert.deepEqual({ teamId: named.body.teamId, admin: named.body.admin }, { teamId: other, admin: false }, 'the team X-Svc-Team names');
    const made = await p.call('POST', '/v2/sandboxes', { templateID: 'base' }, as(`user-team-${other}`));
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal((await p.call('GET', `/sandboxes/${made.body.sandboxID}`, undefined, as('user-alice'))).status, 404, 'the default team does not see it');
    assert.equal((await p.call('GET', `/sandboxes/${made.body.sandboxID}`, undefined, as(`user-team-${other}`))).status, 200);
    const unknown = await p.call('GET', '/v2/sandboxes', undefined, as('user-team-00000000-0000-4000-8000-00000000beef'));
    assert.equal(unknown.status, 403, 'a team the master does not know');
    assert.match(unknown.body.message, /named team .* which does not exist/);

    // The credentials the callback sees: x-admin-token too.
    await p.call('GET', '/v2/sandboxes', undefined, { ...as('user-alice'), 'x-admin-token': 'the-token' });
    assert.equal(cb.seen.at(-1)!['x-admin-token'], 'the-token');

    // Its refusals count against the client's failed-check budget; a caller it allows is still served.
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await p.call('GET', '/v2/sandboxes', undefined, as(`intruder-${i}`))).status);
    assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
    assert.equal((await p.call('GET', '/v2/sandboxes', undefined, as('user-alice'))).status, 200);
  } finally {
    await p.close();
    cb.close();
  }
});

test('beside the callback, the admin key keeps the operator\'s rights; a team key its team whatever the callback names', async () => {
  const cb = await callbackServer();
  const p = await platform({ callback: cb.url });
  try {
    const admin = await p.call('GET', '/svc/whoami');
    assert.equal(admin.body.admin, true);
    assert.equal((await p.call('GET', '/nodes')).status, 200);
    const made = await p.call('POST', '/svc/teams', { name: 'team-keyed' });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const team = await p.call('GET', '/svc/whoami', undefined, { 'x-api-key': made.body.apiKey });
    assert.deepEqual({ teamId: team.body.teamId, admin: team.body.admin }, { teamId: made.body.teamId, admin: false }, 'the key\'s team, not the one the callback named');
    assert.equal((await p.call('GET', '/v2/sandboxes', undefined, as('user-team-x'))).status, 401, 'with a key of its own the gateway still asks for one');
  } finally {
    await p.close();
    cb.close();
  }
});
