/**
 * cluster_token on the master (docs/cluster.md, "Traffic between components"): every route but
 * its probes answers 401 without it, before routing, schemas or the routes' own tokens; the
 * components' clients carry it and work.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CLUSTER_TOKEN_HEADER, clusterHeaders } from '@svc/contracts/cluster-token';
import { EgressPolicySource } from '@svc/contracts/egress-routes';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { MetricsHistoryClient } from '@svc/contracts/metrics-history';
import { SecretResolverClient } from '@svc/contracts/secrets';
import { TeamsClient } from '@svc/contracts/teams';
import { startMasterOverFakeNode, type MasterOverFakeNode } from './testing/master-over-fake-node.ts';

const TOKEN = 'the-masters-cluster-token';
const EGRESS = 'the-egress-admin-token';
let h: MasterOverFakeNode;
before(async () => {
  h = await startMasterOverFakeNode((cfg) => {
    cfg.cluster_token = TOKEN;
    cfg.egress.admin_token = EGRESS;
  });
});
after(async () => { await h?.close(); });

/** One request of every kind of the master's routes: the operator's, the components', the downloads, the egress proxy's and the callbacks. */
const ROUTES: Array<[string, string, string?]> = [
  ['GET', '/v1/teams'],
  ['POST', '/v1/teams', '{"name":"x"}'],
  ['POST', '/internal/v1/keys/verify', '{"key":"e2b_00"}'],
  ['GET', '/v1/sandboxes'],
  ['POST', '/v1/sandboxes', '{'],
  ['GET', '/v1/nodes'],
  ['POST', '/internal/v1/nodes/register', '{}'],
  ['POST', '/internal/v1/nodes/n1/heartbeat', '{}'],
  ['GET', '/internal/v1/sandboxes/x/route'],
  ['POST', '/internal/resume', '{}'],
  ['GET', '/internal/v1/platform-addresses'],
  ['GET', '/internal/v1/egress/policies?nodeId=n1'],
  ['POST', '/internal/v1/secrets/resolve', '{"teamId":"t","names":["a"]}'],
  ['POST', '/internal/v1/identity/tokens', '{}'],
  ['POST', '/internal/template/jobs/j1/status', '{}'],
  ['GET', '/svc/template/artifact/download?artifact_id=a'],
  ['GET', '/internal/v1/layers/l1'],
  ['POST', '/internal/v1/nodes/n1/sandbox-metrics', '{"samples":[]}'],
  ['GET', '/svc/volume'],
  ['GET', '/svc/volumecontent/v/path?path=/'],
  ['GET', '/.well-known/jwks.json'],
  ['GET', '/no/such/route'],
  ['GET', '/notify/health/../../v1/teams'],
  ['GET', '//v1/teams'],
  ['GET', '/%6Eotify/health'],
  ['POST', '/notify/health'],
];

test('without cluster_token, or with a wrong one, every route is 401 and names the setting; the probes answer', async () => {
  const wrong: Array<Record<string, string>> = [{}, { [CLUSTER_TOKEN_HEADER]: `${TOKEN}x` }, { [CLUSTER_TOKEN_HEADER]: '' }, { [CLUSTER_TOKEN_HEADER]: TOKEN.toUpperCase() }];
  for (const headers of wrong) {
    for (const [method, path, body] of ROUTES) {
      const r = await fetch(h.master.url + path, { method, headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) }, body });
      assert.equal(r.status, 401, `${method} ${path} ${JSON.stringify(headers)}`);
      assert.match(((await r.json()) as { message: string }).message, /x-svc-cluster-token must equal cluster_token/);
    }
  }
  for (const path of ['/notify/health', '/metrics', '/notify/health?x=1']) {
    for (const method of ['GET', 'HEAD']) assert.equal((await fetch(h.master.url + path, { method })).status, 200, `${method} ${path}`);
  }
});

test('the components\' clients carry it: a node agent, the egress proxy, the gateway\'s team calls', async () => {
  const node = new MasterInternalClient(h.master.url, { clusterToken: TOKEN });
  assert.ok(Array.isArray((await node.platformAddresses()).pools));
  assert.deepEqual(await new EgressPolicySource(h.master.url, EGRESS, { clusterToken: TOKEN }).policies('n1'), []);
  assert.deepEqual((await new SecretResolverClient(h.master.url, EGRESS, { clusterToken: TOKEN }).resolve('default', ['nothing'])).missing, ['nothing']);
  const teams = new TeamsClient(h.master.url, { headers: clusterHeaders(TOKEN) });
  const made = await teams.createTeam({ name: 'with-the-token' });
  assert.ok((await teams.listTeams()).some((t) => t.teamId === made.team.teamId));
  await new MetricsHistoryClient(h.master.url, { headers: clusterHeaders(TOKEN) }).report('n1', []);
  // The egress proxy's own token still applies behind it: the cluster token alone is not the egress proxy.
  await assert.rejects(new EgressPolicySource(h.master.url, 'wrong', { clusterToken: TOKEN }).policies('n1'), (e: { status: number }) => e.status === 403);
});
