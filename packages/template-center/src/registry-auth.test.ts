import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { mountReadOnly } from './test-support/ext4-mount.ts';
import { startHarness, type Harness } from './test-support/harness.ts';
import { OciLayoutWriter } from './test-support/oci-builder.ts';
import { pushLayout, startRegistry, type TestRegistry } from './test-support/registry-server.ts';
import { startTokenServer, type TokenServer } from './test-support/token-server.ts';

const CREDS = { username: 'alice', password: 'correct horse' };
let h: Harness;
let scratch: string;
let layout: string;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-auth-'));
  layout = join(scratch, 'layout');
  const w = new OciLayoutWriter(layout);
  await w.tag({ layers: [{ entries: [{ name: 'private.txt', content: 'secret stuff' }] }] }, 'v1');
  await w.write();
  h = await startHarness();
});

after(async () => {
  await h?.close();
  rmSync(scratch, { recursive: true, force: true });
});

async function expectBuilt(ref: string, auth?: { username: string; password: string }) {
  const req = await h.submit({ kind: 'registry', ref, insecure: true, auth });
  const r = await h.master.final(req.jobId);
  assert.equal(r.status, 'BUILT', r.error);
  const m = mountReadOnly(r.artifact!.location);
  try { assert.equal(readFileSync(join(m.dir, 'private.txt'), 'utf8'), 'secret stuff'); } finally { m.unmount(); }
}

async function expectFailed(ref: string, auth: { username: string; password: string } | undefined, pattern: RegExp) {
  const req = await h.submit({ kind: 'registry', ref, insecure: true, auth });
  const r = await h.master.final(req.jobId);
  assert.equal(r.status, 'FAILED');
  assert.match(r.error!, pattern);
  assert.ok(!JSON.stringify(h.master.reports.get(req.jobId)).includes(auth?.password ?? '\u0000'), 'no password in reports');
  assert.deepEqual(await h.leftovers(), []);
}

describe('private registry with htpasswd (Basic)', () => {
  let registry: TestRegistry;
  before(async () => {
    registry = await startRegistry({ htpasswd: { users: { [CREDS.username]: CREDS.password } } });
    await pushLayout(layout, 'v1', `${registry.host}/private/app:v1`, CREDS);
  });
  after(async () => { await registry?.stop(); });

  test('right credentials build', async () => {
    await expectBuilt(`${registry.host}/private/app:v1`, CREDS);
  });
  test('wrong credentials fail with a clear reason', async () => {
    await expectFailed(`${registry.host}/private/app:v1`, { username: 'alice', password: 'badpass-xyz' },
      new RegExp(`^unauthorized: wrong credentials for registry ${registry.host.replace(/\./g, '\\.')}`));
  });
  test('no credentials fail saying they are needed', async () => {
    await expectFailed(`${registry.host}/private/app:v1`, undefined, /^unauthorized: registry .* requires credentials to pull private\/app$/);
  });
});

describe('registry with bearer tokens (auth: token)', () => {
  let registry: TestRegistry;
  let tokens: TokenServer;
  before(async () => {
    tokens = await startTokenServer(scratch, { [CREDS.username]: CREDS.password });
    registry = await startRegistry({ token: tokens });
    await pushLayout(layout, 'v1', `${registry.host}/private/app:v1`, CREDS);
  });
  after(async () => {
    await registry?.stop();
    await tokens?.close();
  });

  test('right credentials: challenge, token endpoint, pull', async () => {
    const before = tokens.issued;
    await expectBuilt(`${registry.host}/private/app:v1`, CREDS);
    assert.ok(tokens.issued > before, 'a token was fetched');
  });
  test('wrong credentials: the token service refuses', async () => {
    await expectFailed(`${registry.host}/private/app:v1`, { username: 'alice', password: 'badpass-abc' }, /^unauthorized: wrong credentials for registry /);
  });
  test('anonymous: a token without access is not enough', async () => {
    await expectFailed(`${registry.host}/private/app:v1`, undefined, /^unauthorized: registry .* requires credentials to pull private\/app$/);
  });
});
