import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E2B_KEY_SHAPE, loadOrCreateSecrets } from './secrets.ts';

test('svc up mints an API key the official e2b SDK accepts, and keeps it across restarts', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-secrets-'));
  try {
    const first = loadOrCreateSecrets(dir);
    assert.match(first.api_key, E2B_KEY_SHAPE);
    assert.equal(first.api_key.length, 'e2b_'.length + 40);
    assert.equal(first.previous_api_keys, undefined);
    assert.equal(statSync(join(dir, 'secrets.json')).mode & 0o777, 0o600);
    assert.deepEqual(loadOrCreateSecrets(dir), first);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a key of the older svc_ shape is replaced by an E2B-shaped one and stays accepted', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-secrets-'));
  try {
    writeFileSync(join(dir, 'secrets.json'), JSON.stringify({ api_key: 'svc_old', template_callback_token: 't', proxy_admin_token: 'p' }));
    const s = loadOrCreateSecrets(dir);
    assert.match(s.api_key, E2B_KEY_SHAPE);
    assert.deepEqual(s.previous_api_keys, ['svc_old']);
    assert.equal(s.template_callback_token, 't');
    assert.deepEqual(JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8')), s);
    assert.deepEqual(loadOrCreateSecrets(dir), s, 'stable on the next start');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
