import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clusterTlsOf, ConfigError, internalScheme, loadConfig, runtimeSetting } from './config.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-cfg-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => { const p = join(dir, name); writeFileSync(p, text); return p; };

test('defaults, YAML file and environment overlay', () => {
  const f = file('a.yaml', 'data_dir: /srv/svc\nsvclet_conf:\n  default_timeout_insec: 300\nmaster:\n  create_timeout_insec: 20\n');
  const c = loadConfig({ file: f, env: { SVC_API_KEY: 'k', SVC_PROXY_HTTP_PORT: '8000', SVC_DEFAULT_TIMEOUT_INSEC: '60' } });
  assert.equal(c.data_dir, '/srv/svc');
  assert.equal(c.master.create_timeout_insec, 20);
  assert.equal(c.svclet_conf.default_timeout_insec, 60, 'environment wins over the file');
  assert.equal(c.api.api_key, 'k');
  assert.equal(c.proxy.http_port, 8000);
  assert.equal(c.sandbox_domain, 'localhost:8000');
  assert.deepEqual(c.master.database, { driver: 'sqlite', path: '/srv/svc/master.sqlite' });
});

test('older prefixes still work and log a deprecation notice', () => {
  const notes: string[] = [];
  const c = loadConfig({
    env: { SVC_TC_RECONCILE_INTERVAL_SEC: '60', SVCMASTER_CREATE_TIMEOUT_INSEC: '9', SVC_MASTER_TEMPLATE_CALLBACK_TOKEN: 't', SVC_PROXY_HOST_PORT: '81' },
    onDeprecated: (m) => notes.push(m),
  });
  assert.equal(c.template_center.reconcile.interval_sec, 60);
  assert.equal(c.master.create_timeout_insec, 9);
  assert.equal(c.template_center.callback_token, 't');
  assert.equal(c.proxy.http_port, 81);
  assert.equal(notes.length, 4);
  assert.ok(notes.some((n) => /SVC_TC_RECONCILE_INTERVAL_SEC is deprecated; use SVC_TEMPLATE_CENTER_RECONCILE_INTERVAL_SEC/.test(n)));
  const modern = loadConfig({ env: { SVC_TEMPLATE_CALLBACK_TOKEN: 'new', SVC_TC_CALLBACK_TOKEN: 'old' }, onDeprecated: () => {} });
  assert.equal(modern.template_center.callback_token, 'new', 'the modern name wins');
});

test('external databases and Redis from SVC_EXTERNAL_*', () => {
  const my = loadConfig({ env: { SVC_EXTERNAL_MYSQL_HOST: 'db', SVC_EXTERNAL_MYSQL_PASSWORD: 'p', SVC_EXTERNAL_REDIS_HOST: 'r', SVC_EXTERNAL_REDIS_PORT: '6380' } });
  assert.deepEqual(my.master.database, { driver: 'mysql', host: 'db', port: 3306, user: 'root', password: 'p', database: 'svc', tls: false });
  assert.equal(my.redis.host, 'r');
  assert.equal(my.redis.port, 6380);
  assert.equal(my.redis.tls, false);
  const tls = loadConfig({ env: { SVC_EXTERNAL_MYSQL_HOST: 'db', SVC_EXTERNAL_MYSQL_TLS: 'true', SVC_EXTERNAL_REDIS_HOST: 'r', SVC_EXTERNAL_REDIS_TLS: '1' } });
  assert.equal((tls.master.database as { tls?: boolean }).tls, true);
  assert.equal(tls.redis.tls, true);
  assert.throws(() => loadConfig({ env: { SVC_EXTERNAL_MYSQL_HOST: 'db', SVC_EXTERNAL_MYSQL_TLS: 'maybe' } }), /master\.database\.tls \(from SVC_EXTERNAL_MYSQL_TLS\): must be true or false/);
  assert.throws(() => loadConfig({ env: { SVC_EXTERNAL_REDIS_TLS: 'maybe' } }), /redis\.tls \(from SVC_EXTERNAL_REDIS_TLS\): must be true or false/);
  assert.throws(() => loadConfig({ overrides: { 'redis.tls': 'yes' } }), /redis\.tls: must be true or false/);
  assert.throws(() => loadConfig({ overrides: { 'master.database': { driver: 'mysql', host: 'db', port: 3306, tls: 'yes' } } }), /master\.database\.tls: must be true or false/);
  const pg = loadConfig({ env: { SVC_EXTERNAL_POSTGRES_URL: 'postgres://u@h/d' } });
  assert.deepEqual(pg.master.database, { driver: 'postgres', url: 'postgres://u@h/d' });
});

test('what YAML reads from a database block the driver took stays accepted: a password of digits, a port in quotes, a host name to bind', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-config-'));
  try {
    const f = join(dir, 'ok.yaml');
    writeFileSync(f, 'master:\n  database: { driver: mysql, host: db, port: "3306", password: 123456 }\nproxy:\n  bind: proxy.internal\n');
    const c = loadConfig({ env: {}, file: f });
    assert.equal(c.master.database.driver, 'mysql');
    assert.equal(c.proxy.bind, 'proxy.internal');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a bad configuration is one clear line naming the key', () => {
  const cases: Array<[Parameters<typeof loadConfig>[0], RegExp]> = [
    [{ env: { SVC_CREATE_TIMEOUT_INSEC: 'soon' } }, /^configuration error: master\.create_timeout_insec \(from SVC_CREATE_TIMEOUT_INSEC\): must be an integer/],
    [{ env: { SVC_CREATE_TIMEOUT_INSEC: '0' } }, /^configuration error: master\.create_timeout_insec: must be a positive number/],
    [{ env: { SVC_QEMU_BINARY: '/opt/qemu 10/bin/qemu' } }, /^configuration error: node_agent\.qemu_binary: must be a command or an absolute path, without spaces/],
    [{ env: { SVC_PAUSED_RESOURCE_RELEASE_RATIO: '1.5' } }, /paused_resource_release_ratio: must be in \[0,1\]/],
    [{ env: { SVC_RUNTIME: 'docker' } }, /node_agent\.runtime: must be auto, gvisor, microvm, or both as a list/],
    [{ env: { SVC_RUNTIME: 'gvisor,gvisor' } }, /node_agent\.runtime: must be auto/],
    [{ env: { SVC_PLACEMENT: 'random' } }, /master\.placement: must be spread or pack/],
    [{ env: { SVC_PAUSE_TO_STORE: 'sometimes' } }, /master\.pause_to_store: must be auto, always or never/],
    [{ env: { SVC_DRAIN_CONCURRENCY: '0' } }, /master\.drain_concurrency: must be a whole number from 1 to 16 \(got 0\)/],
    [{ env: { SVC_DRAIN_CONCURRENCY: '17' } }, /master\.drain_concurrency: must be a whole number from 1 to 16/],
    [{ env: { SVC_MAX_CONCURRENT_BUILDS: '0' } }, /master\.max_concurrent_builds: must be a whole number of builds from 1 to 256 \(got 0\)/],
    [{ env: { SVC_TEMPLATE_CENTER_MAX_CONCURRENT_BUILDS: '-1' } }, /template_center\.max_concurrent_builds: must be a whole number of builds from 1 to 256 \(got -1\)/],
    [{ env: { SVC_CLUSTER_TLS_CERT_FILE: '/etc/svc/tls/cluster.pem' } }, /cluster_tls: cert_file and key_file go together/],
    [{ env: { SVC_RUNTIME: 'auto,microvm' } }, /node_agent\.runtime: must be auto/],
    [{ env: { SVC_PROXY_WORKER_PRIORITY: '-21' } }, /proxy\.worker_priority: must be a nice value -20\.\.19 \(got -21\)/],
    [{ env: { SVC_PROXY_WORKER_PRIORITY: 'high' } }, /proxy\.worker_priority \(from SVC_PROXY_WORKER_PRIORITY\): must be an integer/],
    [{ env: { SVC_TEMPLATE_CALLBACK_INSECURE_NO_TOKEN: 'maybe' } }, /insecure_no_token .*must be true or false/],
    [{ env: { SVC_HOST_REGISTRIES: 'localhost:5000, http://127.0.0.1:5000' } }, /^configuration error: template_center\.host_registries: must be registries as images name them, host or host:port \(localhost:5000\), or \* \("http:\/\/127\.0\.0\.1:5000" is not one: leave out the scheme\)$/],
    [{ env: { SVC_PLATFORM_NETWORKS: '10.0.0.0/24, 0.0.0.0/0' } }, /^configuration error: master\.platform_networks: must be IPv4 CIDRs of \/8 or narrower, separated by commas \("0\.0\.0\.0\/0" is not one\)$/],
    [{ env: { SVC_PLATFORM_NETWORKS: 'control.internal' } }, /master\.platform_networks: must be IPv4 CIDRs/],
    [{ env: { SVC_HOST_REGISTRIES: 'localhost:5000/team' } }, /template_center\.host_registries: .*\("localhost:5000\/team" is not one\)$/],
    [{ file: file('b.yaml', 'api:\n  lisen: x\n') }, /^configuration error: api\.lisen: unknown key/],
    [{ file: file('c.yaml', 'proxy:\n  http_port: "80"\n') }, /proxy\.http_port: must be a number/],
    [{ file: file('d.yaml', 'a: [\n') }, /is not valid YAML/],
    [{ file: join(dir, 'missing.yaml') }, /does not exist/],
    // Keys of master.database, which the file gives whole: a typo was a password left out.
    [{ file: file('e.yaml', 'master:\n  database: { driver: mysql, host: db, pasword: s3cret }\n') }, /^configuration error: master\.database\.pasword: unknown key for driver mysql \(its keys: driver, host, port, user, password, database, tls\)/],
    [{ file: file('f.yaml', 'master:\n  database: { driver: mysql, host: db, ssl: true }\n') }, /master\.database\.ssl: unknown key for driver mysql/],
    [{ file: file('g.yaml', 'master:\n  database: { driver: postgres, url: "postgres://x", tls: true }\n') }, /master\.database\.tls: unknown key for driver postgres/],
    [{ file: file('h.yaml', 'master:\n  database: { driver: mysql, host: db, port: 70000 }\n') }, /master\.database\.port: must be a port 1\.\.65535/],
    [{ file: file('i.yaml', 'master:\n  database: { driver: mysql, host: db, password: [1] }\n') }, /master\.database\.password: must be a string \(got \[1\]\)/],
    // Timers: past 2^31-1 ms node fires at once, so "35 days" meant a tight loop.
    [{ file: file('j.yaml', 'template_center:\n  reconcile: { interval_sec: 3000000 }\n') }, /^configuration error: template_center\.reconcile\.interval_sec: must be at most 2147483 s \(24\.8 days\)/],
    [{ env: { SVC_CREATE_TIMEOUT_INSEC: '3000000' } }, /master\.create_timeout_insec: must be at most 2147483 s/],
    [{ file: file('k.yaml', 'lifecycle:\n  sweep_interval_ms: 9999999999\n') }, /lifecycle\.sweep_interval_ms: must be at most 2147483647 ms/],
    // Ports and addresses that loaded and failed later, or never.
    [{ file: file('l.yaml', 'api:\n  listen: 127.0.0.1:99999\n') }, /^configuration error: api\.listen: must be host:port, the port 0\.\.65535/],
    [{ file: file('m.yaml', 'redis:\n  port: 70000\n') }, /redis\.port: must be a port 1\.\.65535 \(got 70000\)/],
    [{ file: file('n.yaml', 'lifecycle:\n  listen: 127.0.0.1:65530\n  replicas: 8\n') }, /lifecycle\.listen: replica ports run from its port up, one per lifecycle\.replicas: 65530 \+ 7 passes 65535/],
    [{ file: file('o.yaml', 'proxy:\n  bind: "0.0.0.0; rm -rf /"\n') }, /proxy\.bind: must be an IP address or a host name to listen on/],
  ];
  for (const [opts, re] of cases) {
    assert.throws(() => loadConfig({ env: {}, ...opts }), (e: Error) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.message.includes('\n'), false);
      assert.match(e.message, re);
      return true;
    });
  }
});

test('node_agent.runtime: auto, one runtime, or a list with the default first', () => {
  assert.equal(runtimeSetting('auto'), 'auto');
  assert.deepEqual(runtimeSetting('microvm'), ['microvm']);
  assert.deepEqual(runtimeSetting('gvisor, microvm'), ['gvisor', 'microvm']);
  assert.deepEqual(runtimeSetting('microvm,gvisor'), ['microvm', 'gvisor']);
  for (const bad of ['', 'docker', 'gvisor,', 'gvisor,gvisor', 'auto,gvisor', 42]) assert.equal(runtimeSetting(bad), undefined, String(bad));
});

test('cluster_tls: the derived component addresses become https; an unreadable file stops the start with its key', () => {
  const plain = loadConfig({ env: {} });
  assert.equal(internalScheme(plain), 'http');
  assert.equal(clusterTlsOf(plain), undefined);
  const cert = file('tls.pem', 'CERT');
  const key = file('tls.key', 'KEY');
  const tls = loadConfig({ env: { SVC_CLUSTER_TLS_CERT_FILE: cert, SVC_CLUSTER_TLS_KEY_FILE: key } });
  for (const addr of [tls.master.addr, tls.node_agent.addr, tls.template_center.addr, tls.egress.admin_addr]) assert.match(addr, /^https:\/\//);
  assert.deepEqual(clusterTlsOf(tls), { cert: Buffer.from('CERT'), key: Buffer.from('KEY') });
  const missing = loadConfig({ env: { SVC_CLUSTER_TLS_CERT_FILE: join(dir, 'nope.pem'), SVC_CLUSTER_TLS_KEY_FILE: key } });
  assert.throws(() => clusterTlsOf(missing), (e: Error) => e instanceof ConfigError && /^configuration error: cluster_tls\.cert_file: cannot be read/.test(e.message));
});

test('api.trusted_proxies: IPv4 and IPv6 addresses and CIDRs from SVC_API_TRUSTED_PROXIES; anything else names the key', () => {
  const c = loadConfig({ env: { SVC_API_TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.7,2001:db8::/32' } });
  assert.equal(c.api.trusted_proxies, '10.0.0.0/8, 192.0.2.7,2001:db8::/32');
  assert.equal(loadConfig({ env: {} }).api.trusted_proxies, '', 'none by default: X-Forwarded-For is believed from nobody');
  for (const bad of ['10.0.0.0/33', 'lb.internal', '10.0.0.0/8,10.1', '2001:db8::/129']) {
    assert.throws(() => loadConfig({ env: { SVC_API_TRUSTED_PROXIES: bad } }), (err: unknown) => err instanceof ConfigError && /^configuration error: api\.trusted_proxies: must be IPv4 or IPv6 addresses or CIDRs/.test(err.message), bad);
  }
});
