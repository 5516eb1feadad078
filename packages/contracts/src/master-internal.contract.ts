/**
 * The contract of the master's internal routes that the data plane and the lifecycle manager
 * call (route look-ups, signed file URLs, activity, the idle sweep's list, pause, resume, kill),
 * as one test suite. The master runs it (packages/master/src/internal-routes.contract.test.ts) and
 * so does the proxy's FakeMaster (packages/proxy/src/testing/fake-master.contract.test.ts), so a
 * test that passes against the fake says something about the wire.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statusOf } from './contract-testing.ts';
import { fileSignature, type SignedFileRequest } from '@svc/common/envd-signature';
import { MasterInternalClient, type OnTimeout, type SandboxRoute } from './master-internal.ts';

export interface MasterInternalSubject {
  url: string;
  /** cluster_token the subject was started with: every call of the suite carries it. */
  clusterToken: string;
  /** A running sandbox with an envd access token, whose idle timeout is short (makeDue). */
  addRunning(opts: { autoResume: boolean; onTimeout: OnTimeout }): Promise<{ sandboxId: string; envdAccessToken: string }>;
  /** Returns once the sandbox's idle deadline has passed with no activity. */
  makeDue(sandboxId: string): Promise<void>;
  close(): Promise<void>;
}

function assertRoute(r: SandboxRoute, sandboxId: string, state: SandboxRoute['state']): void {
  assert.equal(r.sandboxId, sandboxId);
  assert.equal(r.state, state);
  assert.equal(typeof r.nodeId, 'string');
  assert.equal(typeof r.address, 'string');
  assert.equal(typeof r.envdPort, 'number');
  assert.equal(typeof r.autoResume, 'boolean');
}

export function masterInternalContract(name: string, make: () => Promise<MasterInternalSubject>): void {
  test(`master internal routes contract: ${name}`, async (t) => {
    const s = await make();
    const master = new MasterInternalClient(s.url, { clusterToken: s.clusterToken });
    try {
      await t.test('without cluster_token, or with another, every route is 401 before anything else is looked at', async () => {
        const { sandboxId } = await s.addRunning({ autoResume: true, onTimeout: 'pause' });
        for (const token of [undefined, `${s.clusterToken}x`, s.clusterToken.toUpperCase()]) {
          const stranger = new MasterInternalClient(s.url, { clusterToken: token });
          for (const call of [stranger.route(sandboxId), stranger.due(), stranger.resume(sandboxId, 'auto'), stranger.kill(sandboxId, 'api'), stranger.reportActivity({ sandboxIds: [] })]) {
            assert.equal(await statusOf(call), 401, `token ${token}`);
          }
        }
        assert.equal((await master.route(sandboxId)).state, 'running', 'nothing the strangers asked was done');
      });

      await t.test('an unknown sandbox\'s route is 404', async () => {
        assert.equal(await statusOf(master.route('sbx-never-created')), 404);
      });

      await t.test('a running sandbox\'s route carries what the proxy needs', async () => {
        const { sandboxId, envdAccessToken } = await s.addRunning({ autoResume: true, onTimeout: 'pause' });
        const r = await master.route(sandboxId);
        assertRoute(r, sandboxId, 'running');
        assert.equal(r.autoResume, true);
        assert.equal(r.envdAccessToken, envdAccessToken);
      });

      await t.test('pause answers the paused route, a second pause is 409, resume answers the running route', async () => {
        const { sandboxId } = await s.addRunning({ autoResume: false, onTimeout: 'pause' });
        assertRoute(await master.pause(sandboxId, 'api'), sandboxId, 'paused');
        assert.equal(await statusOf(master.pause(sandboxId, 'api')), 409);
        assertRoute(await master.route(sandboxId), sandboxId, 'paused');
        assertRoute(await master.resume(sandboxId, 'auto'), sandboxId, 'running');
        assertRoute(await master.route(sandboxId), sandboxId, 'running');
      });

      await t.test('the idle timeout\'s pause and kill are refused (409) unless the sandbox is due: traffic may have moved its deadline', async () => {
        const { sandboxId } = await s.addRunning({ autoResume: false, onTimeout: 'pause' });
        assert.equal(await statusOf(master.pause(sandboxId, 'timeout')), 409);
        assert.equal(await statusOf(master.kill(sandboxId, 'timeout')), 409);
        assertRoute(await master.route(sandboxId), sandboxId, 'running');
      });

      await t.test('kill answers 204; the route then says terminated and why; pause and resume of it are 410', async () => {
        const { sandboxId } = await s.addRunning({ autoResume: false, onTimeout: 'kill' });
        await s.makeDue(sandboxId);
        assert.equal(await master.kill(sandboxId, 'timeout'), undefined);
        const r = await master.route(sandboxId);
        assert.equal(r.state, 'terminated');
        assert.equal(r.terminateReason, 'timeout');
        assert.equal(await statusOf(master.pause(sandboxId, 'api')), 410, 'a killed sandbox is gone');
        assert.equal(await statusOf(master.resume(sandboxId, 'auto')), 410);
        const other = await s.addRunning({ autoResume: false, onTimeout: 'kill' });
        await master.kill(other.sandboxId, 'api');
        assert.equal((await master.route(other.sandboxId)).terminateReason, 'killed');
      });

      await t.test('an idle sandbox is due with its onTimeout; activity takes it off; unknown ids are no error', async () => {
        const { sandboxId } = await s.addRunning({ autoResume: false, onTimeout: 'pause' });
        assert.ok(!(await master.due()).some((d) => d.sandboxId === sandboxId), 'not due while within its timeout');
        await s.makeDue(sandboxId);
        const due = (await master.due()).find((d) => d.sandboxId === sandboxId);
        assert.ok(due, 'due once idle past its timeout');
        assert.equal(due.state, 'running');
        assert.equal(due.onTimeout, 'pause');
        assert.ok(!Number.isNaN(Date.parse(due.endAt)));
        await master.reportActivity({ sandboxIds: [sandboxId, 'sbx-never-created'] });
        assert.ok(!(await master.due()).some((d) => d.sandboxId === sandboxId), 'activity moved its deadline');
      });

      await t.test('a signed file URL finds the sandbox whose token signed it, expired or not (the caller checks expiry); another signature is 401; a malformed request 400', async () => {
        const { sandboxId, envdAccessToken } = await s.addRunning({ autoResume: false, onTimeout: 'kill' });
        const signed: SignedFileRequest = {
          path: '/home/user/a.txt', operation: 'read', username: 'user',
          signature: fileSignature('/home/user/a.txt', 'read', 'user', envdAccessToken), expiration: undefined,
        };
        assertRoute(await master.routeBySignature(signed), sandboxId, 'running');
        const wrong = { ...signed, signature: fileSignature('/home/user/a.txt', 'read', 'user', 'not-the-token') };
        assert.equal(await statusOf(master.routeBySignature(wrong)), 401);
        const expired = Math.floor(Date.now() / 1000) - 60;
        const stale = { ...signed, expiration: String(expired), signature: fileSignature('/home/user/a.txt', 'read', 'user', envdAccessToken, expired) };
        assertRoute(await master.routeBySignature(stale), sandboxId, 'running');
        assert.equal(await statusOf(master.routeBySignature({ ...signed, operation: 'delete' as never })), 400);
      });
    } finally {
      await s.close();
    }
  });
}
