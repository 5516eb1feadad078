/**
 * How `svc` finds its API (flags, then the environment, then <data dir>/endpoint.json) and that
 * the bin script and the TypeScript sources both run it, against the fake API. The fixture is
 * test-support/cli-fixture.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BIN, MAIN, api, envd, startCliFixture, stopCliFixture, svc } from './test-support/cli-fixture.ts';

before(startCliFixture);
after(stopCliFixture);

describe('endpoint resolution', () => {
  test('flags, then environment, then <data dir>/endpoint.json', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-data-'));
    try {
      writeFileSync(join(dataDir, 'endpoint.json'), JSON.stringify({ apiUrl: api.url, apiKey: 'key-1', sandboxUrl: envd.url }));
      assert.equal((await svc(['tpl', 'list', '--data-dir', dataDir])).code, 0, 'from endpoint.json via --data-dir');
      assert.equal((await svc(['tpl', 'list'], { SVC_DATA_DIR: dataDir })).code, 0, 'from endpoint.json via SVC_DATA_DIR');

      const wrongEnv = await svc(['tpl', 'list', '--data-dir', dataDir], { SVC_API_KEY: 'nope' });
      assert.equal(wrongEnv.code, 1, 'the environment wins over the file');
      assert.match(wrongEnv.stderr, /invalid API key \(HTTP 401\)/);
      assert.equal((await svc(['tpl', 'list', '--data-dir', dataDir, '--api-key', 'key-1'], { SVC_API_KEY: 'nope' })).code, 0, 'the flag wins over the environment');

      const unreachable = await svc(['tpl', 'list', '--api-url', 'http://127.0.0.1:1']);
      assert.equal(unreachable.code, 1);
      assert.match(unreachable.stderr, /^svc: .*cannot connect/);

      writeFileSync(join(dataDir, 'endpoint.json'), '{not json');
      const broken = await svc(['tpl', 'list', '--data-dir', dataDir]);
      assert.equal(broken.code, 1);
      assert.match(broken.stderr, /endpoint\.json is not valid JSON/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('svc env prints the official SDK\'s settings from endpoint.json as export lines, each value quoted for the shell', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-data-'));
    try {
      const missing = await svc(['env', '--data-dir', dataDir]);
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /no platform found in .*endpoint\.json: start one with `svc up`/);
      // An endpoint.json from before `svc env` (no e2bEnv) is no platform to print either.
      writeFileSync(join(dataDir, 'endpoint.json'), JSON.stringify({ apiUrl: api.url, apiKey: 'key-1' }));
      assert.equal((await svc(['env', '--data-dir', dataDir])).code, 1);
      writeFileSync(join(dataDir, 'endpoint.json'), JSON.stringify({ apiUrl: api.url, apiKey: 'key-1', e2bEnv: ['E2B_API_URL=http://127.0.0.1:3000', "E2B_API_KEY=e2b_it's $(id)"] }));
      const printed = await svc(['env', '--data-dir', dataDir]);
      assert.equal(printed.code, 0, printed.stderr);
      assert.equal(printed.stdout, "export E2B_API_URL=http://127.0.0.1:3000\nexport E2B_API_KEY='e2b_it'\\''s $(id)'\n");
      const json = await svc(['env', '--data-dir', dataDir, '--json']);
      assert.deepEqual(JSON.parse(json.stdout), { E2B_API_URL: 'http://127.0.0.1:3000', E2B_API_KEY: "e2b_it's $(id)" });
      writeFileSync(join(dataDir, 'endpoint.json'), JSON.stringify({ e2bEnv: ['rm -rf /; X=1'] }));
      assert.equal((await svc(['env', '--data-dir', dataDir])).code, 1, 'a line that is no NAME=value is refused, not printed');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('the bin script and the TypeScript sources run the CLI', async () => {
    const r = await svc(['--version'], {}, [BIN]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), '0.1.0');
    const fromSource = await svc(['node', 'list', '--json'], { SVC_API_URL: api.url, SVC_API_KEY: 'key-1' }, ['--import', 'tsx', MAIN]);
    assert.equal(JSON.parse(fromSource.stdout)[0].id, 'node-1');
    const usage = await svc(['sandbox', 'info'], {}, ['--import', 'tsx', MAIN]);
    assert.equal(usage.code, 2);
  });
});
