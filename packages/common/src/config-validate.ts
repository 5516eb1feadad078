/** The configuration's checks: each names the first key whose value cannot work (a ConfigError). */
import { parseUpstreamProxy } from './proxy-url.ts';
import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import type { SvcConfig } from './config-types.ts';
import { ConfigError } from './config-error.ts';
import { isIpv4 } from './ipv4.ts';
import { parseIpCidr } from './ip-cidr.ts';
import { parseListen } from './listen-address.ts';
import { systemDirectory } from './config-dirs.ts';

/** `host=ipv4,host=ipv4` → map; a ConfigError names the bad entry. */
export function parseEgressResolve(value: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of value.split(',').map((e) => e.trim()).filter(Boolean)) {
    const m = /^([A-Za-z0-9.-]+)=(\d+\.\d+\.\d+\.\d+)$/.exec(entry);
    if (!m) throw new ConfigError('egress.resolve', `entries are host=ipv4, comma-separated (got ${JSON.stringify(entry)})`);
    out[m[1].toLowerCase()] = m[2];
  }
  return out;
}

const LISTEN_RE = /^(?:[A-Za-z0-9.\-]+|\[[0-9a-fA-F:]+\])?:\d{1,5}$/;

/** Throws a ConfigError naming the first key whose value cannot work. */
export function validateConfig(c: SvcConfig): void {
  const need = (ok: boolean, key: string, problem: string) => { if (!ok) throw new ConfigError(key, problem); };
  for (const key of ['api.listen', 'master.listen', 'node_agent.listen', 'template_center.listen', 'lifecycle.listen']) {
    const v = getPath(c as unknown as Record<string, unknown>, key);
    need(typeof v === 'string' && LISTEN_RE.test(v) && parseListen(v).port <= 65535, key, `must be host:port, the port 0..65535 (got ${JSON.stringify(v)})`);
  }
  const lifecyclePort = parseListen(c.lifecycle.listen).port;
  need(lifecyclePort === 0 || lifecyclePort + c.lifecycle.replicas - 1 <= 65535, 'lifecycle.listen', `replica ports run from its port up, one per lifecycle.replicas: ${lifecyclePort} + ${c.lifecycle.replicas - 1} passes 65535`);
  for (const key of ['proxy.bind', 'egress.admin_bind'] as const) {
    const v = getPath(c as unknown as Record<string, unknown>, key);
    need(typeof v === 'string' && (isIP(v) !== 0 || /^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$/.test(v)), key, `must be an IP address or a host name to listen on (got ${JSON.stringify(v)})`);
  }
  for (const key of ['proxy.http_port', 'proxy.admin_port']) {
    const v = getPath(c as unknown as Record<string, unknown>, key) as number;
    need(Number.isInteger(v) && v >= 1 && v <= 65535, key, `must be a port 1..65535 (got ${v})`);
  }
  need(Number.isInteger(c.proxy.https_port) && c.proxy.https_port >= 0 && c.proxy.https_port <= 65535, 'proxy.https_port', `must be 0 (off) or a port (got ${c.proxy.https_port})`);
  if (c.proxy.https_port > 0) {
    need(!!c.proxy.tls_cert_file && existsSync(c.proxy.tls_cert_file), 'proxy.tls_cert_file', 'must name a PEM certificate file when proxy.https_port is set');
    need(!!c.proxy.tls_key_file && existsSync(c.proxy.tls_key_file), 'proxy.tls_key_file', 'must name a PEM key file when proxy.https_port is set');
  }
  need(Number.isInteger(c.master.node_lost_after_sec) && c.master.node_lost_after_sec >= 5, 'master.node_lost_after_sec', `must be a whole number of seconds, at least 5 (got ${c.master.node_lost_after_sec})`);
  need(Number.isInteger(c.master.drain_concurrency) && c.master.drain_concurrency >= 1 && c.master.drain_concurrency <= 16, 'master.drain_concurrency', `must be a whole number from 1 to 16 (got ${c.master.drain_concurrency})`);
  need(['auto', 'always', 'never'].includes(c.master.pause_to_store), 'master.pause_to_store', `must be auto, always or never (got ${JSON.stringify(c.master.pause_to_store)})`);
  need(!c.cluster_tls.cert_file === !c.cluster_tls.key_file, 'cluster_tls', 'cert_file and key_file go together: set both, or neither');
  need(c.master.placement === 'spread' || c.master.placement === 'pack', 'master.placement', `must be spread or pack (got ${JSON.stringify(c.master.placement)})`);
  need(typeof c.node_agent.labels === 'string', 'node_agent.labels', 'must be a string of name=value pairs, comma-separated');
  // 0 or less was taken as 1 in silence (Slots' floor): a setting that says otherwise is refused.
  for (const [key, v] of [['master.max_concurrent_builds', c.master.max_concurrent_builds], ['template_center.max_concurrent_builds', c.template_center.max_concurrent_builds]] as const) {
    need(Number.isInteger(v) && v >= 1 && v <= 256, key, `must be a whole number of builds from 1 to 256 (got ${v})`);
  }
  need(Number.isInteger(c.template_center.max_image_mb) && c.template_center.max_image_mb >= 64, 'template_center.max_image_mb', `must be a whole number of MiB, 64 or more (got ${c.template_center.max_image_mb})`);
  need(Number.isInteger(c.svclet_conf.max_disk_size_mb) && c.svclet_conf.max_disk_size_mb >= c.svclet_conf.default_disk_size_mb, 'svclet_conf.max_disk_size_mb', `must be a whole number of MiB, at least svclet_conf.default_disk_size_mb (got ${c.svclet_conf.max_disk_size_mb})`);
  need(Number.isInteger(c.master.build_files_team_max_mb) && c.master.build_files_team_max_mb >= 1, 'master.build_files_team_max_mb', `must be a whole number of MiB, 1 or more (got ${c.master.build_files_team_max_mb})`);
  need(Number.isInteger(c.master.build_files_keep_days) && c.master.build_files_keep_days >= 1 && c.master.build_files_keep_days <= 365, 'master.build_files_keep_days', `must be a whole number of days from 1 to 365 (got ${c.master.build_files_keep_days})`);
  need(Number.isInteger(c.master.create_timeout_insec) && c.master.create_timeout_insec > 0, 'master.create_timeout_insec', `must be a positive number of seconds (got ${c.master.create_timeout_insec})`);
  need(Number.isInteger(c.svclet_conf.default_timeout_insec), 'svclet_conf.default_timeout_insec', `must be an integer number of seconds (got ${c.svclet_conf.default_timeout_insec})`);
  need(Number.isInteger(c.svclet_conf.default_cpu_count) && c.svclet_conf.default_cpu_count > 0, 'svclet_conf.default_cpu_count', 'must be a positive integer');
  need(Number.isInteger(c.svclet_conf.default_memory_mb) && c.svclet_conf.default_memory_mb >= 64, 'svclet_conf.default_memory_mb', 'must be an integer of at least 64');
  const r = c.node_agent.host.quota.paused_resource_release_ratio;
  need(typeof r === 'number' && r >= 0 && r <= 1, 'node_agent.host.quota.paused_resource_release_ratio', `must be in [0,1] (got ${r})`);
  const oc = c.node_agent.host.quota.memory_overcommit;
  need(typeof oc === 'number' && oc >= 1 && oc <= 1000, 'node_agent.host.quota.memory_overcommit', `must be from 1 to 1000 (got ${oc})`);
  const conns = c.node_agent.host.quota.max_connections_per_sandbox;
  need(Number.isInteger(conns) && conns >= 0, 'node_agent.host.quota.max_connections_per_sandbox', `must be a non-negative integer (got ${conns})`);
  const reserve = c.node_agent.host.quota.memory_reserve_mb;
  need(Number.isInteger(reserve) && reserve >= 0, 'node_agent.host.quota.memory_reserve_mb', `must be a non-negative integer (got ${reserve})`);
  const cpu = c.node_agent.host.quota.max_cpu_pressure;
  need(typeof cpu === 'number' && cpu >= 0 && cpu <= 100, 'node_agent.host.quota.max_cpu_pressure', `must be from 0 (off) to 100 (got ${cpu})`);
  need(c.node_agent.guest_kernel_dir.startsWith('/'), 'node_agent.guest_kernel_dir', `must be an absolute path (got ${JSON.stringify(c.node_agent.guest_kernel_dir)})`);
  need(/^[^\s]+$/.test(c.node_agent.qemu_binary), 'node_agent.qemu_binary', `must be a command or an absolute path, without spaces (got ${JSON.stringify(c.node_agent.qemu_binary)})`);
  need(c.node_agent.volume_plugin_base_dir.startsWith('/'), 'node_agent.volume_plugin_base_dir', `must be an absolute path (got ${JSON.stringify(c.node_agent.volume_plugin_base_dir)})`);
  // The node agent makes it root's alone (0700): /tmp would lose its sticky bit and its users.
  const systemDir = systemDirectory(c.node_agent.volume_plugin_base_dir);
  need(systemDir === undefined, 'node_agent.volume_plugin_base_dir', `must be a directory of its own, not the system's ${systemDir}: svc makes it 0700 (for example ${systemDir === '/' ? '' : systemDir}/svc-volumes)`);
  for (const key of ['master', 'node_agent'] as const) {
    need(Array.isArray(c[key].volume_plugins), `${key}.volume_plugins`, 'must be a list of {name, type, binary_path | socket_path}');
  }
  need(runtimeSetting(c.node_agent.runtime) !== undefined, 'node_agent.runtime', `must be auto, gvisor, microvm, or both as a list with the default first (gvisor,microvm) (got ${JSON.stringify(c.node_agent.runtime)})`);
  need(/^\d+\.\d+\.\d+\.\d+\/(?:[8-9]|[12]\d|30)$/.test(c.node_agent.address_pool) && isIpv4(c.node_agent.address_pool.split('/')[0]), 'node_agent.address_pool', `must be an IPv4 CIDR of /8../30 (got ${JSON.stringify(c.node_agent.address_pool)})`);
  need(Number.isInteger(c.node_agent.warm_pool_size) && c.node_agent.warm_pool_size >= 0, 'node_agent.warm_pool_size', 'must be a non-negative integer');
  need(Number.isInteger(c.node_agent.warm_pool_initial) && c.node_agent.warm_pool_initial >= 0, 'node_agent.warm_pool_initial', 'must be a non-negative integer');
  need(Number.isInteger(c.node_agent.warm_pool_max) && c.node_agent.warm_pool_max >= c.node_agent.warm_pool_size, 'node_agent.warm_pool_max', 'must be an integer no smaller than warm_pool_size');
  need(Number.isInteger(c.events.retention_days) && c.events.retention_days >= 1 && c.events.retention_days <= 365, 'events.retention_days', `must be a whole number of days from 1 to 365 (got ${c.events.retention_days})`);
  // Wider than a /8 would cut every sandbox off from most of the internet.
  cidrList(c.master.platform_networks, 'master.platform_networks', 8, 'IPv4 CIDRs of /8 or narrower');
  cidrList(c.events.webhook_allow_cidrs, 'events.webhook_allow_cidrs', 0, 'IPv4 CIDRs');
  need(Number.isInteger(c.lifecycle.replicas) && c.lifecycle.replicas >= 1 && c.lifecycle.replicas <= 8, 'lifecycle.replicas', `must be 1..8 (got ${c.lifecycle.replicas})`);
  need(c.lifecycle.sweep_interval_ms >= 100, 'lifecycle.sweep_interval_ms', 'must be at least 100');
  for (const entry of c.template_center.host_registries.split(',').map((x) => x.trim()).filter(Boolean)) {
    // As an image reference names its registry (what the template center compares), never a URL.
    need(entry === '*' || /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\])(?::\d{1,5})?$/.test(entry), 'template_center.host_registries',
      `must be registries as images name them, host or host:port (localhost:5000), or * (${JSON.stringify(entry)} is not one${/^https?:\/\//.test(entry) ? ': leave out the scheme' : ''})`);
  }
  need(c.template_center.reconcile.interval_sec > 0, 'template_center.reconcile.interval_sec', 'must be positive');
  need(c.template_center.reconcile.stale_after_sec > 0, 'template_center.reconcile.stale_after_sec', 'must be positive');
  need(c.api.max_body_bytes >= 1024, 'api.max_body_bytes', 'must be at least 1024');
  trustedProxies(c.api.trusted_proxies);
  const db = c.master.database;
  need(['sqlite', 'postgres', 'mysql'].includes(db.driver), 'master.database.driver', `must be sqlite, postgres or mysql (got ${JSON.stringify(db.driver)})`);
  // master.database is taken whole from the file (each driver has its own keys), so its keys are
  // checked here: `pasword:` or `ssl: true` loaded without a word, and the master connected with
  // no password, in plain text.
  const keys = DATABASE_KEYS[db.driver];
  for (const [k, v] of Object.entries(db)) {
    need(k in keys, `master.database.${k}`, `unknown key for driver ${db.driver} (its keys: ${Object.keys(keys).join(', ')})`);
    const want = keys[k];
    // YAML reads `password: 123456` as a number and `port: "3306"` as a string; the driver took both.
    const ok = want === 'text' ? typeof v === 'string' || typeof v === 'number' : want === 'port' ? typeof v === 'number' || (typeof v === 'string' && /^\d{1,5}$/.test(v)) : typeof v === want;
    need(ok, `master.database.${k}`, `must be ${want === 'boolean' ? 'true or false' : want === 'port' ? 'a port number' : `a ${want === 'text' ? 'string' : want}`} (got ${JSON.stringify(v)})`);
  }
  if (db.driver === 'postgres') need(/^postgres(ql)?:\/\//.test(db.url), 'master.database.url', 'must be a postgres:// URL');
  if (db.driver === 'mysql') {
    need(!!db.host, 'master.database.host', 'must be set');
    const port = Number(db.port);
    need(db.port === undefined || (Number.isInteger(port) && port >= 1 && port <= 65535), 'master.database.port', `must be a port 1..65535 (got ${db.port})`);
  }
  need(typeof c.redis.tls === 'boolean', 'redis.tls', 'must be true or false');
  need(Number.isInteger(c.redis.port) && c.redis.port > 0 && c.redis.port <= 65535, 'redis.port', `must be a port 1..65535 (got ${c.redis.port})`);
  for (const key of ['proxy.workers', 'egress.workers'] as const) {
    const v = getPath(c as unknown as Record<string, unknown>, key) as number;
    need(Number.isInteger(v) && v >= 0 && v <= 256, key, `must be 0 (one per core) to 256 worker processes (got ${v})`);
  }
  need(Number.isInteger(c.proxy.worker_priority) && c.proxy.worker_priority >= -20 && c.proxy.worker_priority <= 19, 'proxy.worker_priority', `must be a nice value -20..19 (got ${c.proxy.worker_priority})`);
  need(typeof c.proxy.worker_user === 'string' && /^([a-z_][a-z0-9_-]{0,31})?$/.test(c.proxy.worker_user), 'proxy.worker_user', `must be a system account's name, or empty to keep root (got ${JSON.stringify(c.proxy.worker_user)})`);
  need(Number.isInteger(c.egress.audit_max_mb) && c.egress.audit_max_mb >= 0, 'egress.audit_max_mb', `must be a whole number of MiB, 0 for no size limit (got ${c.egress.audit_max_mb})`);
  need(Number.isInteger(c.egress.audit_keep) && c.egress.audit_keep >= 1 && c.egress.audit_keep <= 1000, 'egress.audit_keep', `must be 1..1000 rotated files (got ${c.egress.audit_keep})`);
  for (const key of ['egress.http_port', 'egress.https_port', 'egress.admin_port', 'egress.tunnel_port'] as const) {
    const v = getPath(c as unknown as Record<string, unknown>, key) as number;
    need(Number.isInteger(v) && v >= 1 && v <= 65535, key, `must be a port 1..65535 (got ${v})`);
  }
  need(/^\d+\.\d+\.\d+\.\d+$/.test(c.egress.address), 'egress.address', `must be an IPv4 address (got ${JSON.stringify(c.egress.address)})`);
  parseEgressResolve(c.egress.resolve);
  parseUpstreamProxy(c.egress.upstream_proxy);
  timesInRange(c as unknown as Record<string, unknown>, '');
}

/** Each driver's keys; `text`: a string, or a number YAML read from digits; `port`: a number or its digits. */
const DATABASE_KEYS: Record<string, Record<string, 'string' | 'text' | 'port' | 'boolean'>> = {
  sqlite: { driver: 'string', path: 'string' },
  postgres: { driver: 'string', url: 'string' },
  mysql: { driver: 'string', host: 'string', port: 'port', user: 'text', password: 'text', database: 'text', tls: 'boolean' },
};

/**
 * Node waits at most 2^31-1 ms: a longer setTimeout fires after 1 ms, so an interval of "35 days,
 * as good as off" ran its task in a tight loop and a create deadline past it expired at once. Every
 * key named *_ms, *_sec or *_insec stays within it.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

function timesInRange(obj: Record<string, unknown>, prefix: string): void {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) timesInRange(v as Record<string, unknown>, key);
    if (typeof v !== 'number') continue;
    const ms = /_ms$/.test(k) ? v : /_(?:in)?sec$/.test(k) ? v * 1000 : undefined;
    // The lower bounds are each key's own (checked above; some take -1 for "unset").
    if (ms !== undefined && !(ms <= MAX_TIMER_MS)) {
      const most = /_ms$/.test(k) ? `${MAX_TIMER_MS} ms` : `${Math.floor(MAX_TIMER_MS / 1000)} s (24.8 days)`;
      throw new ConfigError(key, `must be at most ${most}, the longest wait a timer holds (got ${v})`);
    }
  }
}

function getPath(obj: Record<string, unknown>, path: string): unknown {
  return path.split('.').reduce<unknown>((o, p) => (o as Record<string, unknown> | undefined)?.[p], obj);
}

/**
 * node_agent.runtime read: `auto` (microvm where KVM boots a guest, else gvisor), or the runtimes
 * the node offers, its default first. undefined: not a valid setting.
 */
export function runtimeSetting(value: unknown): 'auto' | Array<'gvisor' | 'microvm'> | undefined {
  if (typeof value !== 'string') return undefined;
  if (value === 'auto') return 'auto';
  const kinds = value.split(',').map((k) => k.trim());
  if (!kinds.every((k): k is 'gvisor' | 'microvm' => k === 'gvisor' || k === 'microvm')) return undefined;
  return new Set(kinds).size === kinds.length ? kinds : undefined;
}

/** A comma-separated list of IPv4 addresses and CIDRs, none wider than `/minPrefix`. */
function cidrList(value: string, key: string, minPrefix: number, what: string): void {
  for (const cidr of value.split(',').map((x) => x.trim()).filter(Boolean)) {
    const m = /^(\d+\.\d+\.\d+\.\d+)(?:\/(\d|[12]\d|3[0-2]))?$/.exec(cidr);
    if (!m || !isIpv4(m[1]!) || Number(m[2] ?? 32) < minPrefix) throw new ConfigError(key, `must be ${what}, separated by commas (${JSON.stringify(cidr)} is not one)`);
  }
}

/** api.trusted_proxies: IPv4 or IPv6 addresses and CIDRs; each is believed about X-Forwarded-For, so none may be a typo. */
function trustedProxies(value: string): void {
  for (const entry of value.split(',').map((x) => x.trim()).filter(Boolean)) {
    try {
      parseIpCidr(entry);
    } catch {
      throw new ConfigError('api.trusted_proxies', `must be IPv4 or IPv6 addresses or CIDRs of the load balancers in front of the gateway, separated by commas (${JSON.stringify(entry)} is not one)`);
    }
  }
}
