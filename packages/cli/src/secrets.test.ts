import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
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

test('a damaged secrets.json is an error naming the file and what deleting it costs, and is left as it is', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-secrets-'));
  try {
    const file = join(dir, 'secrets.json');
    for (const [text, why] of [['{"api_key": "e2b_ab', /cannot be read as JSON/], ['null', /must hold a JSON object/], ['{"api_key": 5}', /api_key must be a string/]] as const) {
      writeFileSync(file, text);
      assert.throws(() => loadOrCreateSecrets(dir), (e: Error) => e.message.includes(file) && why.test(e.message) && /new API key and new cluster tokens/.test(e.message));
      assert.equal(readFileSync(file, 'utf8'), text, 'never rewritten');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the file is replaced whole: a link planted at its name is replaced, never written through', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-secrets-'));
  try {
    const elsewhere = join(dir, 'someone-elses');
    writeFileSync(elsewhere, 'theirs');
    symlinkSync(elsewhere, join(dir, 'secrets.json.tmp'));
    writeFileSync(join(dir, 'secrets.json'), JSON.stringify({ api_key: 'svc_old' }));
    loadOrCreateSecrets(dir);
    assert.equal(readFileSync(elsewhere, 'utf8'), 'theirs');
    assert.equal(lstatSync(join(dir, 'secrets.json')).isFile(), true);
    assert.equal(statSync(join(dir, 'secrets.json')).mode & 0o777, 0o600);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
