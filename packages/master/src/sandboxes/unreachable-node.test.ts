/**
 * A node that does not answer: a team's call (the gateway passes the answer on to the team) hears
 * no address of the platform's; the operator's hears where and why.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_TEAM_ID, TEAM_HEADER } from '@svc/contracts/teams';
import { startMasterOverFakeNode } from '../testing/master-over-fake-node.ts';

test('a node that does not answer: a team hears a 503 naming no address, the operator the details', async () => {
  const h = await startMasterOverFakeNode();
  try {
    const { sandboxId } = await h.master.sandboxes.create({
      template: 'base', onTimeout: 'kill', autoResume: false, metadata: {}, envVars: {}, secure: false,
      network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [],
    });
    const nodePort = new URL(h.node.url).port;
    await h.node.close();
    const call = async (path: string, team: boolean) => {
      const res = await fetch(`${h.master.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(team ? { [TEAM_HEADER]: DEFAULT_TEAM_ID } : {}) }, body: '{}' });
      return { status: res.status, message: (await res.json() as { message: string }).message };
    };
    for (const path of [`/v1/sandboxes/${sandboxId}/pause`, `/v1/sandboxes/${sandboxId}/snapshots`]) {
      const team = await call(path, true);
      assert.equal(team.status, 503, `${path}: ${team.message}`);
      assert.doesNotMatch(team.message, new RegExp(`127\\.0\\.0\\.1|:${nodePort}\\b|ECONNREFUSED`), path);
      assert.match(team.message, /did not answer; retry shortly/, path);
    }
    const operator = await call(`/v1/sandboxes/${sandboxId}/pause`, false);
    assert.equal(operator.status, 503);
    assert.match(operator.message, new RegExp(`127\\.0\\.0\\.1:${nodePort}`), 'the operator reads where');
  } finally {
    await h.close();
  }
});
