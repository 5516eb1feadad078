import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCommand } from './run-command.ts';

describe('runCommand', () => {
  const set: Record<string, string> = {
    SVC_CLUSTER_TOKEN: 'cluster-secret',
    SVC_EXTERNAL_POSTGRES_URL: 'postgres://u:pw@db/svc',
    SVC_S3_SECRET_ACCESS_KEY: 's3-secret',
    SVC_LOCAL_VOLUME_ROOT: '/srv/volumes',
  };
  const saved: Record<string, string | undefined> = {};
  before(() => {
    for (const [k, v] of Object.entries(set)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('runs a plugin without svc\'s secrets in its environment, and with the rest of it', async () => {
    const r = await runCommand('/usr/bin/env', [], { timeoutMs: 5_000 });
    assert.equal(r.code, 0);
    const env = new Map(r.stdout.split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    for (const secret of ['SVC_CLUSTER_TOKEN', 'SVC_EXTERNAL_POSTGRES_URL', 'SVC_S3_SECRET_ACCESS_KEY']) assert.equal(env.get(secret), undefined, secret);
    assert.equal(env.get('SVC_LOCAL_VOLUME_ROOT'), '/srv/volumes', 'what a plugin needs of svc\'s configuration stays');
    assert.equal(env.get('PATH'), process.env.PATH);
  });
});
