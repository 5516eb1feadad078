import { test } from 'node:test';
import assert from 'node:assert/strict';
import { essentialHostEnv, hostCommandEnv } from './host-command-env.ts';

test('host commands get the environment without svc\'s secrets', () => {
  const env = hostCommandEnv({
    PATH: '/usr/bin', HOME: '/root', LANG: 'C.UTF-8', SVC_LOG_LEVEL: 'info', SVC_DATA_DIR: '/var/lib/svc',
    SVC_CLUSTER_TOKEN: 't', SVC_NODE_AGENT_TOKEN: 't', SVC_EGRESS_ADMIN_TOKEN: 't', SVC_API_KEY: 'k', SVC_UPLOAD_SIGNING_KEY: 'k',
    SVC_EXTERNAL_POSTGRES_URL: 'postgres://u:p@h/db', SVC_EXTERNAL_REDIS_PASSWORD: 'p', SVC_TEMPLATE_CENTER_S3_SECRET_ACCESS_KEY: 's',
    SVC_VAULT_KEY_FILE: '/etc/svc/vault.json', SVCMASTER_CLUSTER_TOKEN: 't',
  });
  assert.deepEqual(Object.keys(env).sort(), ['HOME', 'LANG', 'PATH', 'SVC_DATA_DIR', 'SVC_LOG_LEVEL']);
});

test('svc\'s secrets are left out whatever the case of their names (svc_admin_token is read lower-case)', () => {
  const env = hostCommandEnv({ PATH: '/usr/bin', svc_admin_token: 't', Svc_Cluster_Token: 't', svcmaster_api_key: 'k', svc_data_dir: '/var/lib/svc' });
  assert.deepEqual(Object.keys(env).sort(), ['PATH', 'svc_data_dir']);
});

test('the commands next to a sandbox get only the essentials, none of the host\'s credentials', () => {
  const env = essentialHostEnv({
    PATH: '/usr/bin', HOME: '/root', LANG: 'C.UTF-8', LC_ALL: 'C', TZ: 'UTC', https_proxy: 'http://p:3128',
    AWS_ACCESS_KEY_ID: 'a', AWS_SECRET_ACCESS_KEY: 's', GITHUB_TOKEN: 'g', DATABASE_URL: 'postgres://x', SVC_DATA_DIR: '/var/lib/svc',
    SVC_CLUSTER_TOKEN: 't', LD_PRELOAD: '/tmp/x.so', NODE_OPTIONS: '--require /tmp/x.js',
  });
  assert.deepEqual(Object.keys(env).sort(), ['HOME', 'LANG', 'LC_ALL', 'PATH', 'TZ', 'https_proxy']);
});
