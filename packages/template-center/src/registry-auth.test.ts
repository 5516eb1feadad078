import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { mountReadOnly } from './test-support/ext4-mount.ts';
import { startHarness, type Harness } from './test-support/harness.ts';
import { startMiniRegistry } from './test-support/mini-registry.ts';
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
  test('another team listing the private layer in a manifest of its own registry is not handed the copy pulled with the login', async () => {
    await expectBuilt(`${registry.host}/private/app:v1`, CREDS);
    // The same image, served by a registry of the other team's that lacks the layer's bytes.
    const copy = join(scratch, 'layout-without-layer');
    cpSync(layout, copy, { recursive: true });
    const index = JSON.parse(readFileSync(join(copy, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string }> };
    const manifest = JSON.parse(readFileSync(join(copy, 'blobs', 'sha256', index.manifests[0].digest.slice(7)), 'utf8')) as { layers: Array<{ digest: string }> };
    const layer = manifest.layers[0].digest;
    rmSync(join(copy, 'blobs', 'sha256', layer.slice(7)));
    const theirs = await startMiniRegistry(copy);
    try {
      await expectFailed(`${theirs.host}/evil/app:v1`, undefined, new RegExp(`^blob unknown: layer ${layer} is missing from ${theirs.host.replace(/\./g, '\\.')}/evil/app`));
      assert.equal(theirs.blobGets(layer), 1, 'asked its own registry for the layer');
    } finally {
      await theirs.close();
    }
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
