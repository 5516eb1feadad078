import { readFileSync, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { SvcConfig } from './config-types.ts';
import { intToIp, parseCidr } from './ipv4.ts';
import { ConfigError } from './config-error.ts';
import { validateConfig } from './config-validate.ts';
import { defaultConfig } from './config-defaults.ts';
import { readConfigFile, secretsIn } from './config-file.ts';
import { warnUnknownSvcNames } from './config-env-names.ts';

export { ConfigError } from './config-error.ts';
export { parseUpstreamProxy, type UpstreamProxy } from './proxy-url.ts';
export { parseEgressResolve, runtimeSetting, validateConfig } from './config-validate.ts';
export { makeDirPrivate, systemDirectory, type PrivateDirResult } from './config-dirs.ts';

export type { SvcConfig, DatabaseConfig, RedisConfig, VolumePluginConfig } from './config-types.ts';
export { defaultConfig } from './config-defaults.ts';

/** master.platform_networks as a list. */
export function platformNetworksOf(cfg: { master: { platform_networks: string } }): string[] {
  return cfg.master.platform_networks.split(',').map((x) => x.trim()).filter(Boolean);
}

type Kind = 'string' | 'int' | 'number' | 'bool';

/** Environment variable → configuration key. Older prefixes are tried as fallbacks (see envValue). */
const ENV_KEYS: Array<[string, string, Kind]> = [
  ['SVC_DATA_DIR', 'data_dir', 'string'],
  ['SVC_SANDBOX_DOMAIN', 'sandbox_domain', 'string'],
  ['SVC_API_LISTEN', 'api.listen', 'string'],
  ['SVC_API_KEY', 'api.api_key', 'string'],
  ['SVC_API_PREVIOUS_KEYS', 'api.previous_api_keys', 'string'],
  ['SVC_AUTH_CALLBACK_URL', 'api.auth_callback_url', 'string'],
  ['SVC_API_MAX_BODY_BYTES', 'api.max_body_bytes', 'int'],
  ['SVC_MASTER_LISTEN', 'master.listen', 'string'],
  ['SVC_MASTER_ADDR', 'master.addr', 'string'],
  ['SVC_CREATE_TIMEOUT_INSEC', 'master.create_timeout_insec', 'int'],
  ['SVC_PLACEMENT', 'master.placement', 'string'],
  ['SVC_NODE_LOST_AFTER_SEC', 'master.node_lost_after_sec', 'int'],
  ['SVC_PAUSE_TO_STORE', 'master.pause_to_store', 'string'],
  ['SVC_DRAIN_CONCURRENCY', 'master.drain_concurrency', 'int'],
  ['SVC_CLUSTER_TOKEN', 'cluster_token', 'string'],
  ['SVC_CLUSTER_TLS_CERT_FILE', 'cluster_tls.cert_file', 'string'],
  ['SVC_CLUSTER_TLS_KEY_FILE', 'cluster_tls.key_file', 'string'],
  ['SVC_UPLOAD_SIGNING_KEY', 'master.upload_signing_key', 'string'],
  ['SVC_VAULT_KEY_FILE', 'master.vault_key_file', 'string'],
  ['SVC_IDENTITY_ISSUER_URL', 'master.identity_issuer_url', 'string'],
  ['SVC_IDENTITY_TRUST_DOMAIN', 'master.identity_trust_domain', 'string'],
  ['SVC_API_AUDIT_LOG', 'api.audit_log', 'string'],
  ['SVC_API_MAX_FAILED_KEYS_PER_MIN', 'api.max_failed_keys_per_min', 'int'],
  ['SVC_API_TRUSTED_PROXIES', 'api.trusted_proxies', 'string'],
  ['SVC_MAX_CONCURRENT_BUILDS', 'master.max_concurrent_builds', 'int'],
  ['SVC_BUILD_TIMEOUT_SEC', 'master.build_timeout_sec', 'int'],
  ['SVC_BUILD_FILES_KEEP_DAYS', 'master.build_files_keep_days', 'int'],
  ['SVC_BUILD_FILES_TEAM_MAX_MB', 'master.build_files_team_max_mb', 'int'],
  ['SVC_PLATFORM_NETWORKS', 'master.platform_networks', 'string'],
  ['SVC_DEFAULT_TIMEOUT_INSEC', 'svclet_conf.default_timeout_insec', 'int'],
  ['SVC_ADMIN_TOKEN', 'svcproxy.admin_token', 'string'],
  ['SVC_NODE_AGENT_LISTEN', 'node_agent.listen', 'string'],
  ['SVC_NODE_AGENT_ADDR', 'node_agent.addr', 'string'],
  ['SVC_NODE_AGENT_TOKEN', 'node_agent.token', 'string'],
  ['SVC_NODE_ID', 'node_agent.node_id', 'string'],
  ['SVC_VOLUME_PLUGIN_BASE_DIR', 'node_agent.volume_plugin_base_dir', 'string'],
  ['SVC_GUEST_KERNEL_DIR', 'node_agent.guest_kernel_dir', 'string'],
  ['SVC_QEMU_BINARY', 'node_agent.qemu_binary', 'string'],
  ['SVC_RUNTIME', 'node_agent.runtime', 'string'],
  ['SVC_NODE_LABELS', 'node_agent.labels', 'string'],
  ['SVC_ADDRESS_POOL', 'node_agent.address_pool', 'string'],
  ['SVC_WARM_POOL_SIZE', 'node_agent.warm_pool_size', 'int'],
  ['SVC_WARM_POOL_INITIAL', 'node_agent.warm_pool_initial', 'int'],
  ['SVC_WARM_POOL_MAX', 'node_agent.warm_pool_max', 'int'],
  ['SVC_PAUSED_RESOURCE_RELEASE_RATIO', 'node_agent.host.quota.paused_resource_release_ratio', 'number'],
  ['SVC_MEMORY_OVERCOMMIT', 'node_agent.host.quota.memory_overcommit', 'number'],
  ['SVC_MEMORY_RESERVE_MB', 'node_agent.host.quota.memory_reserve_mb', 'int'],
  ['SVC_MAX_CONNECTIONS_PER_SANDBOX', 'node_agent.host.quota.max_connections_per_sandbox', 'int'],
  ['SVC_MAX_CPU_PRESSURE', 'node_agent.host.quota.max_cpu_pressure', 'number'],
  ['SVC_PROXY_HTTP_PORT', 'proxy.http_port', 'int'],
  ['SVC_PROXY_HTTPS_PORT', 'proxy.https_port', 'int'],
  ['SVC_PROXY_ADMIN_PORT', 'proxy.admin_port', 'int'],
  ['SVC_PROXY_BIND', 'proxy.bind', 'string'],
  ['svc_admin_token', 'proxy.admin_token', 'string'],
  // The spelling of every other variable; the lower-case one above is kept for installs that set it.
  ['SVC_PROXY_ADMIN_TOKEN', 'proxy.admin_token', 'string'],
  ['SVC_PROXY_TLS_CERT_FILE', 'proxy.tls_cert_file', 'string'],
  ['SVC_PROXY_TLS_KEY_FILE', 'proxy.tls_key_file', 'string'],
  ['SVC_TEMPLATE_CENTER_LISTEN', 'template_center.listen', 'string'],
  ['SVC_TEMPLATE_CENTER_ADDR', 'template_center.addr', 'string'],
  ['SVC_TEMPLATE_CALLBACK_TOKEN', 'template_center.callback_token', 'string'],
  ['SVC_TEMPLATE_CALLBACK_INSECURE_NO_TOKEN', 'template_center.insecure_no_token', 'bool'],
  ['SVC_TEMPLATE_CENTER_RECONCILE_INTERVAL_SEC', 'template_center.reconcile.interval_sec', 'int'],
  ['SVC_TEMPLATE_CENTER_RECONCILE_STALE_AFTER_SEC', 'template_center.reconcile.stale_after_sec', 'int'],
  ['SVC_TEMPLATE_CENTER_S3_ENDPOINT', 'template_center.s3.endpoint', 'string'],
  ['SVC_TEMPLATE_CENTER_S3_REGION', 'template_center.s3.region', 'string'],
  ['SVC_TEMPLATE_CENTER_S3_BUCKET', 'template_center.s3.bucket', 'string'],
  ['SVC_TEMPLATE_CENTER_S3_ACCESS_KEY_ID', 'template_center.s3.access_key_id', 'string'],
  ['SVC_TEMPLATE_CENTER_S3_SECRET_ACCESS_KEY', 'template_center.s3.secret_access_key', 'string'],
  ['SVC_TEMPLATE_CENTER_S3_SESSION_TOKEN', 'template_center.s3.session_token', 'string'],
  ['SVC_TEMPLATE_CENTER_S3_PREFIX', 'template_center.s3.prefix', 'string'],
  ['SVC_TEMPLATE_CENTER_S3_FORCE_PATH_STYLE', 'template_center.s3.force_path_style', 'bool'],
  ['SVC_TEMPLATE_CENTER_S3_PRESIGN_EXPIRES_SEC', 'template_center.s3.presign_expires_sec', 'int'],
  ['SVC_TEMPLATE_CENTER_MAX_CONCURRENT_BUILDS', 'template_center.max_concurrent_builds', 'int'],
  ['SVC_TEMPLATE_CENTER_BLOB_CACHE_DIR', 'template_center.blob_cache.dir', 'string'],
  ['SVC_TEMPLATE_CENTER_BLOB_CACHE_MB', 'template_center.blob_cache.max_mb', 'number'],
  ['SVC_TEMPLATE_CENTER_CA_CERT', 'template_center.ca_cert_file', 'string'],
  ['SVC_REGISTRY_MIRRORS', 'template_center.registry_mirrors', 'string'],
  ['SVC_HOST_REGISTRIES', 'template_center.host_registries', 'string'],
  ['SVC_TEMPLATE_CENTER_MAX_IMAGE_MB', 'template_center.max_image_mb', 'int'],
  ['SVC_MAX_DISK_SIZE_MB', 'svclet_conf.max_disk_size_mb', 'int'],
  ['SVC_CODE_INTERPRETER_TEMPLATE', 'template_center.code_interpreter_template', 'bool'],
  ['SVC_MCP_GATEWAY_TEMPLATE', 'template_center.mcp_gateway_template', 'bool'],
  ['SVC_EGRESS_ENABLED', 'egress.enabled', 'bool'],
  ['SVC_EGRESS_ADDRESS', 'egress.address', 'string'],
  ['SVC_EGRESS_HTTP_PORT', 'egress.http_port', 'int'],
  ['SVC_EGRESS_HTTPS_PORT', 'egress.https_port', 'int'],
  ['SVC_EGRESS_ADMIN_BIND', 'egress.admin_bind', 'string'],
  ['SVC_EGRESS_ADMIN_PORT', 'egress.admin_port', 'int'],
  ['SVC_EGRESS_ADMIN_ADDR', 'egress.admin_addr', 'string'],
  ['SVC_EGRESS_ADMIN_TOKEN', 'egress.admin_token', 'string'],
  ['SVC_EGRESS_AUDIT_LOG', 'egress.audit_log', 'string'],
  ['SVC_EGRESS_CA_DIR', 'egress.ca_dir', 'string'],
  ['SVC_EGRESS_RESOLVE', 'egress.resolve', 'string'],
  ['SVC_EGRESS_UPSTREAM_CA_FILE', 'egress.upstream_ca_file', 'string'],
  ['SVC_EGRESS_TUNNEL_PORT', 'egress.tunnel_port', 'int'],
  ['SVC_EGRESS_WORKERS', 'egress.workers', 'int'],
  ['SVC_PROXY_WORKERS', 'proxy.workers', 'int'],
  ['SVC_PROXY_WORKER_PRIORITY', 'proxy.worker_priority', 'int'],
  ['SVC_PROXY_WORKER_USER', 'proxy.worker_user', 'string'],
  ['SVC_EGRESS_UPSTREAM_PROXY', 'egress.upstream_proxy', 'string'],
  ['SVC_EGRESS_AUDIT_MAX_MB', 'egress.audit_max_mb', 'int'],
  ['SVC_EGRESS_AUDIT_KEEP', 'egress.audit_keep', 'int'],
  ['SVC_EGRESS_REFUSE_ATTACHED_NETWORKS', 'egress.refuse_attached_networks', 'bool'],
  ['SVC_EVENTS_RETENTION_DAYS', 'events.retention_days', 'int'],
  ['SVC_WEBHOOK_ALLOW_CIDRS', 'events.webhook_allow_cidrs', 'string'],
  ['SVC_LIFECYCLE_REPLICAS', 'lifecycle.replicas', 'int'],
  ['SVC_LIFECYCLE_LISTEN', 'lifecycle.listen', 'string'],
  ['SVC_LIFECYCLE_WARMUP_SEC', 'lifecycle.warmup_sec', 'int'],
  ['SVC_LIFECYCLE_SWEEP_INTERVAL_MS', 'lifecycle.sweep_interval_ms', 'int'],
  ['SVC_EXTERNAL_REDIS_HOST', 'redis.host', 'string'],
  ['SVC_EXTERNAL_REDIS_PORT', 'redis.port', 'int'],
  ['SVC_EXTERNAL_REDIS_PASSWORD', 'redis.password', 'string'],
  ['SVC_EXTERNAL_REDIS_DB', 'redis.db', 'int'],
  ['SVC_EXTERNAL_REDIS_TLS', 'redis.tls', 'bool'],
];

/**
 * How many warm sandboxes a template's pool starts with: `warm_pool_initial` kept within
 * [`warm_pool_size`, `warm_pool_max`], and none when the pool is off (size 0).
 */
export function warmPoolStart(c: SvcConfig['node_agent']): number {
  if (c.warm_pool_size === 0) return 0;
  return Math.min(Math.max(c.warm_pool_size, c.warm_pool_max), Math.max(c.warm_pool_size, c.warm_pool_initial));
}

/** Names replaced by newer ones, for a value with no modern spelling of its own. */
const RENAMED: Record<string, string> = { SVC_PROXY_HOST_PORT: 'SVC_PROXY_HTTP_PORT' };

/** The external database's variables (applyExternalDatabase). */
const EXTERNAL_DATABASE_NAMES = ['SVC_EXTERNAL_POSTGRES_URL', 'SVC_EXTERNAL_MYSQL_HOST', 'SVC_EXTERNAL_MYSQL_PORT', 'SVC_EXTERNAL_MYSQL_USER', 'SVC_EXTERNAL_MYSQL_PASSWORD', 'SVC_EXTERNAL_MYSQL_DATABASE', 'SVC_EXTERNAL_MYSQL_TLS'];

/** Every variable the configuration reads, in every spelling it accepts (for warnUnknownSvcNames). */
const KNOWN_ENV: ReadonlySet<string> = new Set([...ENV_KEYS.map(([n]) => n), ...EXTERNAL_DATABASE_NAMES, ...Object.keys(RENAMED)].flatMap((n) => [n, ...olderNames(n)]));

export interface LoadOptions {
  /** YAML file; when absent, SVC_CONFIG, then `<data_dir>/config.yaml` if it exists. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** Applied after the file and before the environment (command-line flags). */
  overrides?: Record<string, unknown>;
  onDeprecated?: (message: string) => void;
  /** False: the caller fills in more (`svc up --tls` its certificate) and calls validateConfig itself. */
  validate?: boolean;
}

export function loadConfig(opts: LoadOptions = {}): SvcConfig {
  const env = opts.env ?? process.env;
  const warn = opts.onDeprecated ?? ((m: string) => process.stderr.write(`warning: ${m}\n`));
  const cfg = defaultConfig() as unknown as Record<string, unknown>;

  const file = opts.file ?? env.SVC_CONFIG;
  if (file) {
    if (!existsSync(file)) throw new ConfigError('config file', `${file} does not exist`);
    const { text, othersRead } = readConfigFile(file);
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (e) {
      throw new ConfigError('config file', `${file} is not valid YAML: ${(e as Error).message.split('\n')[0]}`);
    }
    const secrets = othersRead ? secretsIn(doc) : [];
    if (secrets.length > 0) warn(`${file} may be read by every user of this host and holds secrets (${secrets.join(', ')}): chmod 600 it`);
    if (doc !== null && doc !== undefined) {
      if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigError('config file', `${file} must hold a mapping`);
      mergeInto(cfg, doc as Record<string, unknown>, '');
    }
  }
  for (const [k, v] of Object.entries(opts.overrides ?? {})) if (v !== undefined) setPath(cfg, k, v);

  for (const [name, key, kind] of ENV_KEYS) {
    const raw = envValue(env, name, warn);
    if (raw !== undefined) setPath(cfg, key, coerce(raw, kind, `${key} (from ${name})`));
  }
  for (const [old, modern] of Object.entries(RENAMED)) {
    if (env[old] !== undefined && env[modern] === undefined) {
      warn(`${old} is deprecated; use ${modern}`);
      const entry = ENV_KEYS.find(([n]) => n === modern)!;
      setPath(cfg, entry[1], coerce(env[old]!, entry[2], `${entry[1]} (from ${old})`));
    }
  }
  applyExternalDatabase(cfg as unknown as SvcConfig, env, warn);
  warnUnknownSvcNames(env, KNOWN_ENV, warn);
  const out = cfg as unknown as SvcConfig;
  fillDerived(out);
  if (opts.validate !== false) validateConfig(out);
  return out;
}

/** The modern name first, then the older prefixes (SVCMASTER_, SVC_MASTER_, SVC_TC_), with a notice. */
function envValue(env: NodeJS.ProcessEnv, name: string, warn: (m: string) => void): string | undefined {
  if (env[name] !== undefined) return env[name];
  for (const old of olderNames(name)) {
    if (old !== name && env[old] !== undefined) {
      warn(`${old} is deprecated; use ${name}`);
      return env[old];
    }
  }
  return undefined;
}

/** The older spellings of a variable, in the order they are tried. */
function olderNames(name: string): string[] {
  if (!name.startsWith('SVC_')) return [];
  const rest = name.slice(4);
  const olds = [`SVCMASTER_${rest}`, `SVC_MASTER_${rest}`];
  if (rest.startsWith('TEMPLATE_CENTER_')) olds.unshift(`SVC_TC_${rest.slice('TEMPLATE_CENTER_'.length)}`);
  if (rest.startsWith('TEMPLATE_')) olds.push(`SVC_TC_${rest.slice('TEMPLATE_'.length)}`);
  return olds;
}

function applyExternalDatabase(cfg: SvcConfig, env: NodeJS.ProcessEnv, warn: (m: string) => void) {
  const pg = envValue(env, 'SVC_EXTERNAL_POSTGRES_URL', warn);
  const myHost = envValue(env, 'SVC_EXTERNAL_MYSQL_HOST', warn);
  if (pg && myHost) throw new ConfigError('master.database', 'both SVC_EXTERNAL_POSTGRES_URL and SVC_EXTERNAL_MYSQL_HOST are set; choose one');
  if (pg) cfg.master.database = { driver: 'postgres', url: pg };
  if (myHost) {
    const port = envValue(env, 'SVC_EXTERNAL_MYSQL_PORT', warn);
    cfg.master.database = {
      driver: 'mysql',
      host: myHost,
      port: port === undefined ? 3306 : (coerce(port, 'int', 'master.database.port (from SVC_EXTERNAL_MYSQL_PORT)') as number),
      user: envValue(env, 'SVC_EXTERNAL_MYSQL_USER', warn) ?? 'root',
      password: envValue(env, 'SVC_EXTERNAL_MYSQL_PASSWORD', warn) ?? '',
      database: envValue(env, 'SVC_EXTERNAL_MYSQL_DATABASE', warn) ?? 'svc',
      tls: coerce(envValue(env, 'SVC_EXTERNAL_MYSQL_TLS', warn) ?? 'false', 'bool', 'master.database.tls (from SVC_EXTERNAL_MYSQL_TLS)') as boolean,
    };
  }
}

function fillDerived(c: SvcConfig) {
  c.data_dir = resolve(c.data_dir.replace(/^~(?=$|\/)/, homedir()));
  if (c.master.database.driver === 'sqlite' && !c.master.database.path) c.master.database.path = join(c.data_dir, 'master.sqlite');
  const scheme = internalScheme(c);
  if (!c.master.addr) c.master.addr = `${scheme}://${hostForClient(c.master.listen)}`;
  if (!c.node_agent.addr) c.node_agent.addr = `${scheme}://${hostForClient(c.node_agent.listen)}`;
  if (!c.template_center.addr) c.template_center.addr = `${scheme}://${hostForClient(c.template_center.listen)}`;
  if (!c.node_agent.state_dir) c.node_agent.state_dir = join(c.data_dir, 'node');
  // One file configures both sides in a one-host install: the node's list is the master's unless it has its own.
  if (c.node_agent.volume_plugins.length === 0) c.node_agent.volume_plugins = c.master.volume_plugins;
  if (!c.template_center.artifact_dir) c.template_center.artifact_dir = join(c.data_dir, 'artifacts');
  if (!c.sandbox_domain) c.sandbox_domain = `localhost:${c.proxy.http_port}`;
  if (!c.egress.admin_addr) c.egress.admin_addr = `${scheme}://${c.egress.admin_bind === '0.0.0.0' ? '127.0.0.1' : c.egress.admin_bind}:${c.egress.admin_port}`;
  if (!c.master.identity_issuer_url) c.master.identity_issuer_url = `http://${hostForClient(c.api.listen)}`;
  if (!c.egress.audit_log) c.egress.audit_log = join(c.data_dir, 'log', 'svc-egress', 'access.jsonl');
  if (!c.egress.ca_dir) c.egress.ca_dir = join(c.data_dir, 'egress-ca');
  if (!c.egress.address) {
    try {
      c.egress.address = egressAddressOf(c.node_agent.address_pool);
    } catch {
      // A pool that is no CIDR: validateConfig names node_agent.address_pool, the cause.
    }
  }
  if (!c.template_center.ca_cert_file && c.egress.enabled) c.template_center.ca_cert_file = join(c.egress.ca_dir, 'ca.pem');
}

/**
 * The egress proxy's default address: the host side of the address pool's first /30, which the
 * node agent keeps for it (docs/egress.md).
 */

export function egressAddressOf(pool: string): string {
  return intToIp(parseCidr(pool).base + 1);
}

export function hostForClient(listen: string): string {
  return listen.replace(/^0\.0\.0\.0:/, '127.0.0.1:').replace(/^:/, '127.0.0.1:');
}

function coerce(raw: string, kind: Kind, key: string): unknown {
  const v = raw.trim();
  switch (kind) {
    case 'string': return raw;
    case 'bool':
      if (/^(1|true|yes|on)$/i.test(v)) return true;
      if (/^(0|false|no|off|)$/i.test(v)) return false;
      throw new ConfigError(key, `must be true or false (got ${JSON.stringify(raw)})`);
    case 'int':
      if (!/^-?\d+$/.test(v)) throw new ConfigError(key, `must be an integer (got ${JSON.stringify(raw)})`);
      return Number(v);
    case 'number':
      if (v === '' || Number.isNaN(Number(v))) throw new ConfigError(key, `must be a number (got ${JSON.stringify(raw)})`);
      return Number(v);
  }
}

function mergeInto(target: Record<string, unknown>, src: Record<string, unknown>, prefix: string) {
  for (const [k, v] of Object.entries(src)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (!(k in target)) throw new ConfigError(key, 'unknown key');
    const cur = target[k];
    if (cur !== null && typeof cur === 'object' && !Array.isArray(cur)) {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(key, 'must be a mapping');
      if (key === 'master.database') { target[k] = { ...(v as object) }; continue; }
      mergeInto(cur as Record<string, unknown>, v as Record<string, unknown>, key);
    } else {
      const want = typeof cur;
      if (typeof v !== want) throw new ConfigError(key, `must be a ${want === 'number' ? 'number' : want} (got ${JSON.stringify(v)})`);
      target[k] = v;
    }
  }
}

function setPath(obj: Record<string, unknown>, path: string, value: unknown) {
  const parts = path.split('.');
  let o = obj;
  for (const p of parts.slice(0, -1)) o = o[p] as Record<string, unknown>;
  o[parts[parts.length - 1]] = value;
}

/** The scheme the components speak to each other: https when cluster_tls is set (docs/cluster.md). */
export function internalScheme(c: { cluster_tls?: SvcConfig['cluster_tls'] }): 'http' | 'https' {
  return c.cluster_tls?.cert_file ? 'https' : 'http';
}

/**
 * The key and certificate a component's own listener serves with (cluster_tls), read now so a
 * missing or unreadable file stops the component at start; undefined when cluster_tls is unset.
 */
export function clusterTlsOf(c: { cluster_tls?: SvcConfig['cluster_tls'] }): { key: Buffer; cert: Buffer } | undefined {
  if (!c.cluster_tls?.cert_file) return undefined;
  const read = (file: string, key: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new ConfigError(`cluster_tls.${key}`, `cannot be read: ${(err as Error).message}`);
    }
  };
  return { cert: read(c.cluster_tls.cert_file, 'cert_file'), key: read(c.cluster_tls.key_file, 'key_file') };
}
