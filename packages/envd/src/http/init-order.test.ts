/**
 * POST /init while envd has no token yet (a cold start before the node agent's /init, or a
 * microvm restore between the token's clearing and the new /init): anyone in the sandbox may
 * send one, and it must not outdate, or outlive, the node agent's.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { StartResponseSchema } from '@svc/contracts/envd/process/process_pb';
import { envelope, post, readStream } from '../testing/connect-client.ts';
import { startEnvd, type RunningEnvd } from '../testing/envd-process.ts';

let envd: RunningEnvd;
before(async () => {
  envd = await startEnvd({ ENVD_DEFAULT_USER: 'root' });
});
after(() => envd.stop());

function init(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return fetch(`${envd.url}/init`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

async function run(cmd: string, token: string): Promise<string> {
  const res = await post(`${envd.url}/process.Process/Start`, envelope(0, Buffer.from(JSON.stringify({ process: { cmd: '/bin/sh', args: ['-c', cmd] }, stdin: false }))), {
    'content-type': 'application/connect+json',
    'x-access-token': token,
  });
  assert.equal(res.status, 200, res.body.toString());
  const { messages, end } = readStream(StartResponseSchema, res.body, false);
  assert.equal(end.error, undefined);
  return messages
    .map((m) => m.event?.event)
    .map((e) => (e?.case === 'data' && e.value.output.case === 'stdout' ? Buffer.from(e.value.output.value).toString() : ''))
    .join('');
}

test('an /init sent before the node agent\'s cannot outdate it or leave its env, user or workdir behind', async () => {
  const poisoned = { envVars: { LD_PRELOAD: '/tmp/evil.so' }, defaultUser: 'nobody', defaultWorkdir: '/tmp' };
  const farAhead = await init({ ...poisoned, timestamp: '9999-12-31T00:00:00Z' });
  assert.equal(farAhead.status, 400);
  assert.match(((await farAhead.json()) as { message: string }).message, /ahead of the sandbox's clock/);

  // Within the allowed skew, and without a token: applied (envd is open), but it moves no mark.
  const justAhead = await init({ ...poisoned, timestamp: new Date(Date.now() + 50_000).toISOString() });
  assert.equal(justAhead.status, 204);

  const agent = await init({ accessToken: 'agent-token', envVars: { E2B_SANDBOX_ID: 'sbx-1' }, timestamp: new Date().toISOString() });
  assert.equal(agent.status, 204);
  assert.equal((await fetch(`${envd.url}/envs`)).status, 401, 'the node agent\'s token is in force');
  const envs = (await (await fetch(`${envd.url}/envs`, { headers: { 'x-access-token': 'agent-token' } })).json()) as Record<string, string>;
  assert.equal(envs.E2B_SANDBOX_ID, 'sbx-1');
  assert.equal(envs.LD_PRELOAD, undefined);
  assert.equal(await run('whoami; pwd', 'agent-token'), 'root\n/root\n', 'the start-up default user and its home, not the earlier /init\'s');
});

test('an /init that sets a token and is older than the last applied one is a 409 and changes nothing', async () => {
  const stale = await init(
    { accessToken: 'late-token', envVars: { E2B_SANDBOX_ID: 'sbx-old' }, timestamp: new Date(Date.now() - 3_600_000).toISOString() },
    { 'x-access-token': 'agent-token' },
  );
  assert.equal(stale.status, 409);
  assert.match(((await stale.json()) as { message: string }).message, /older than the last \/init that set a token/);
  const envs = await fetch(`${envd.url}/envs`, { headers: { 'x-access-token': 'agent-token' } });
  assert.equal(envs.status, 200, 'the token did not change');
  assert.equal(((await envs.json()) as Record<string, string>).E2B_SANDBOX_ID, 'sbx-1');

  // Without a token in it, a late /init is acknowledged and dropped, as in E2B's envd.
  const tokenless = await init({ envVars: {}, timestamp: new Date(Date.now() - 3_600_000).toISOString() }, { 'x-access-token': 'agent-token' });
  assert.equal(tokenless.status, 204);
  assert.equal((await fetch(`${envd.url}/envs`, { headers: { 'x-access-token': 'agent-token' } })).status, 200);
});

test('the token\'s holder clearing it (before a microvm restore) drops the mark: the next node\'s /init may be older', async () => {
  // The node that made the snapshot ran ahead; the one that restores it is an hour behind.
  const ahead = await init({ accessToken: 'node-a-token', timestamp: new Date(Date.now() + 30_000).toISOString() }, { 'x-access-token': 'agent-token' });
  assert.equal(ahead.status, 204);
  const cleared = await init({}, { 'x-access-token': 'node-a-token' }); // the node agent's clearEnvdToken
  assert.equal(cleared.status, 204);
  assert.equal((await fetch(`${envd.url}/envs`)).status, 200, 'no token in force');
  const behind = await init({ accessToken: 'node-b-token', envVars: { E2B_SANDBOX_ID: 'sbx-fork' }, timestamp: new Date(Date.now() - 3_600_000).toISOString() });
  assert.equal(behind.status, 204, await behind.text());
  const envs = await fetch(`${envd.url}/envs`, { headers: { 'x-access-token': 'node-b-token' } });
  assert.equal(envs.status, 200, 'the restoring node\'s token is in force');
  assert.equal(((await envs.json()) as Record<string, string>).E2B_SANDBOX_ID, 'sbx-fork');

  // Its mark holds from there on; and an /init without the token cannot clear it (nor the mark).
  const stale = await init({ accessToken: 'late', timestamp: new Date(Date.now() - 7_200_000).toISOString() }, { 'x-access-token': 'node-b-token' });
  assert.equal(stale.status, 409);
  assert.equal((await init({})).status, 401);
});
