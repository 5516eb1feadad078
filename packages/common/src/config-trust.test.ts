import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from './config.ts';
import { readConfigFile, trustedOwners } from './config-file.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-cfg-trust-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string, mode: number) => { const p = join(dir, name); writeFileSync(p, text); chmodSync(p, mode); return p; };
const asRoot = process.getuid?.() === 0;

test('as root, a config file another user may change is refused (it names what root runs)', { skip: !asRoot && 'needs root' }, () => {
  const yaml = 'node_agent:\n  qemu_binary: /usr/bin/qemu-system-x86_64\n';
  const theirs = file('theirs.yaml', yaml, 0o644);
  chownSync(theirs, 4321, 4321);
  assert.throws(() => loadConfig({ file: theirs, env: {} }), (e: Error) => e instanceof ConfigError && /config file: .*belongs to uid 4321.*chown root/.test(e.message));
  for (const mode of [0o666, 0o664, 0o646]) {
    const open = file(`open-${mode.toString(8)}.yaml`, yaml, mode);
    assert.throws(() => loadConfig({ file: open, env: {} }), (e: Error) => e instanceof ConfigError && /may be changed by other users .*chmod go-w/.test(e.message), mode.toString(8));
  }
  assert.equal(loadConfig({ file: file('ok.yaml', yaml, 0o644), env: {} }).node_agent.qemu_binary, '/usr/bin/qemu-system-x86_64');
});

test('a config file others may read is warned of when it holds secrets', () => {
  const notes: string[] = [];
  loadConfig({ file: file('secret.yaml', 'api:\n  api_key: k\ncluster_token: t\ntemplate_center:\n  insecure_no_token: false\n', 0o644), env: {}, onDeprecated: (m) => notes.push(m) });
  assert.equal(notes.length, 1);
  assert.match(notes[0]!, /may be read by every user of this host and holds secrets \(api\.api_key, cluster_token\): chmod 600 it/);
  notes.length = 0;
  loadConfig({ file: file('private.yaml', 'api:\n  api_key: k\n', 0o600), env: {}, onDeprecated: (m) => notes.push(m) });
  loadConfig({ file: file('plain.yaml', 'master:\n  placement: pack\n', 0o644), env: {}, onDeprecated: (m) => notes.push(m) });
  assert.deepEqual(notes, []);
});

test('a misspelt SVC_ variable is named once; svc\'s other variables and SVC_PROXY_ADMIN_TOKEN are not', () => {
  const notes: string[] = [];
  const env = { SVC_PLATFORM_NETWORK: '10.0.0.0/8', svc_api_key: 'x', SVC_PROXY_ADMIN_TOKEN: 'admin', SVC_LOG_LEVEL: 'debug', SVC_TEST_PG_URL: 'x', SVC_ENVD_WARMUP: '1', SVC_API_URL: 'http://x', SVCMASTER_CREATE_TIMEOUT_INSEC: '9', SVC_EXTERNAL_REDIS_HOST: 'r', PATH: '/bin' };
  const c = loadConfig({ env, onDeprecated: (m) => notes.push(m) });
  assert.equal(c.proxy.admin_token, 'admin', 'SVC_PROXY_ADMIN_TOKEN sets proxy.admin_token');
  const unknown = notes.filter((n) => /svc reads no such variable/.test(n));
  assert.equal(unknown.length, 2, notes.join('\n'));
  assert.match(unknown[0]!, /^SVC_PLATFORM_NETWORK is set but svc reads no such variable/);
  assert.match(unknown[1]!, /^svc_api_key /);
  notes.length = 0;
  loadConfig({ env, onDeprecated: (m) => notes.push(m) });
  assert.equal(notes.filter((n) => /svc reads no such variable/.test(n)).length, 0, 'once per process');
  assert.equal(loadConfig({ env: { svc_admin_token: 'old' }, onDeprecated: () => {} }).proxy.admin_token, 'old', 'the lower-case name still works');
});

test('node_agent.volume_plugin_base_dir may not be one of the system\'s directories (it is made 0700)', () => {
  for (const d of ['/', '/tmp', '/var/tmp', '/home', '/usr', '/etc', '/var', '/root']) {
    assert.throws(() => loadConfig({ env: { SVC_VOLUME_PLUGIN_BASE_DIR: d } }), (e: Error) => e instanceof ConfigError && /node_agent\.volume_plugin_base_dir: must be a directory of its own/.test(e.message), d);
  }
  assert.equal(loadConfig({ env: { SVC_VOLUME_PLUGIN_BASE_DIR: '/var/lib/svc/volume' } }).node_agent.volume_plugin_base_dir, '/var/lib/svc/volume');
});

test('as root, a config file of the user who owns svc\'s own program is accepted (sudo svc up from a user\'s checkout)', { skip: !asRoot && 'needs root' }, () => {
  const mine = file('checkout-owner.yaml', 'node_agent:\n  qemu_binary: /usr/bin/qemu-system-x86_64\n', 0o644);
  chownSync(mine, 4321, 4321);
  assert.equal(readConfigFile(mine, 0, new Set([0, 4321])).othersRead, true);
  const entry = file('entry.mjs', '', 0o755);
  chownSync(entry, 4321, 4321);
  assert.deepEqual([...trustedOwners(entry)].sort(), [0, 4321]);
  assert.deepEqual([...trustedOwners(join(dir, 'missing.mjs'))], [0]);
});
