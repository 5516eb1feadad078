import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, chmodSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readyJson, writeEndpointFile } from './up-ready.ts';

const endpoint = { apiUrl: 'http://127.0.0.1:3000', apiKey: 'e2b_0123456789abcdef', sandboxUrl: 'http://127.0.0.1:3002', domain: 'localhost:3002' };

test('endpoint.json is made 0600 even where an older version left a 0644 one, and a link at its name is replaced, not written through', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-endpoint-'));
  try {
    const file = join(dir, 'endpoint.json');
    writeFileSync(file, '{}\n');
    chmodSync(file, 0o644);
    writeEndpointFile(dir, endpoint, ['E2B_API_KEY=x']);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(JSON.parse(readFileSync(file, 'utf8')).apiKey, endpoint.apiKey);
    const elsewhere = join(dir, 'elsewhere');
    writeFileSync(elsewhere, 'untouched');
    rmSync(file);
    symlinkSync(elsewhere, file);
    writeEndpointFile(dir, endpoint, []);
    assert.equal(readFileSync(elsewhere, 'utf8'), 'untouched');
    assert.equal(statSync(file).mode & 0o777, 0o600);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('svc up --json prints the admin key only to a terminal, and otherwise says where to read it', () => {
  const piped = JSON.parse(readyJson(endpoint, '/var/lib/svc', false));
  assert.equal(piped.apiKey, undefined);
  assert.ok(!JSON.stringify(piped).includes(endpoint.apiKey));
  assert.equal(piped.ready, true);
  assert.equal(piped.apiUrl, endpoint.apiUrl);
  assert.equal(piped.endpointFile, '/var/lib/svc/endpoint.json');
  assert.match(piped.apiKeyHint, /svc env --json --data-dir \/var\/lib\/svc/);
  assert.equal(JSON.parse(readyJson(endpoint, '/var/lib/svc', true)).apiKey, endpoint.apiKey);
});
