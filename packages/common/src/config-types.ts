/** The whole platform configuration: one YAML file plus SVC_* environment variables (docs/configuration.md). */
export interface SvcConfig {
  /** Where state lives in the embedded mode (SQLite, artifacts, sandboxes). */
  data_dir: string;
  /** Host name sandboxes are reachable under: `<port>-<sandboxID>.<sandbox_domain>`. */
  sandbox_domain: string;
  api: {
    listen: string;
    /** Empty: authentication disabled. */
    api_key: string;
    /** Keys accepted besides api_key, comma-separated (a rotated-out key, keys of older installs). */
    previous_api_keys: string;
    /** Optional operator auth callback URL (receives X-Request-Path / X-Request-Method). */
    auth_callback_url: string;
    max_body_bytes: number;
    /** JSON Lines of every mutating call (who, what, result); '': <data_dir>/log/svc-api/audit.jsonl. */
    audit_log: string;
    /** Failed key checks from one source address in a minute before it gets 429. */
    max_failed_keys_per_min: number;
    /**
     * Load balancers and TLS terminators in front of the gateway, comma-separated IPv4/IPv6
     * addresses and CIDRs: from them the client's address is read from X-Forwarded-For.
     */
    trusted_proxies: string;
  };
  master: {
    listen: string;
    /** Where other components reach the master. */
    addr: string;
    /**
     * Signs the upload URLs of template builds' context files (E2B's COPY); every master of a
     * cluster needs the same one. Empty: a random key per process (URLs then work only on it).
     */
    upload_signing_key: string;
    /** Template builds (E2B's builder) that run their steps at once on one master; more are queued. */
    max_concurrent_builds: number;
    /** A template build still running after this long fails and its sandbox is killed. */
    build_timeout_sec: number;
    /** Context files (COPY) no build asked for in this many days leave the artifact store. */
    build_files_keep_days: number;
    /** A team's uploaded build context files stored at once, in MiB (docs/templates.md, "Copying files"). */
    build_files_team_max_mb: number;
    /**
     * The networks of the platform's own hosts, IPv4 CIDRs separated by commas: no sandbox
     * reaches them on any port, nor a webhook (docs/cluster.md, "Traffic between components").
     */
    platform_networks: string;
    create_timeout_insec: number;
    /** Where creates go among the nodes that can take them: spread (the most memory free) or pack (the least that fits) (docs/cluster.md). */
    placement: 'spread' | 'pack';
    /** A node silent this long is lost: its running sandboxes are reported ended (docs/cluster.md). */
    node_lost_after_sec: number;
    /**
     * Whether a pause copies the paused sandbox's state into the artifact store, so another node
     * can resume it (docs/cluster.md, "Cross-node restore"): auto does when more than one node is
     * registered; a drain stores whatever it pauses in any case.
     */
    pause_to_store: 'auto' | 'always' | 'never';
    /** How many sandboxes a node drain moves at once (docs/cluster.md, "Draining a node"), 1 to 16. */
    drain_concurrency: number;
    database: DatabaseConfig;
    /** The vault key file (docs/security.md); '': <data_dir>/vault/key.json, made when missing. */
    vault_key_file: string;
    /** The OIDC issuer of workload tokens: the API's public URL ('': the API's own address). */
    identity_issuer_url: string;
    /** SPIFFE trust domain of workload tokens' subjects. */
    identity_trust_domain: string;
    /** Volume plugins whose controller hooks the master calls; the first is the default driver (docs/volume-plugins.md). */
    volume_plugins: VolumePluginConfig[];
  };
  svclet_conf: {
    /** Cluster default idle timeout; <= 0 means no idle TTL (shipped -1). */
    default_timeout_insec: number;
    default_cpu_count: number;
    default_memory_mb: number;
    /** The largest disk a template may ask for (disk_size_mb), in MiB; a bigger one is a 400. */
    max_disk_size_mb: number;
    default_disk_size_mb: number;
  };
  svcproxy: {
    /** Sent by the master as X-Svc-Admin-Token to the data-plane proxy admin routes. */
    admin_token: string;
  };
  node_agent: {
    listen: string;
    addr: string;
    /**
     * X-Svc-Node-Token, the same on every node agent and master: a node agent answers only its
     * /health and /metrics without it. Empty: it answers anyone who reaches its port (svc up
     * generates one).
     */
    token: string;
    node_id: string;
    /**
     * auto, gvisor, microvm, or a comma-separated list of gvisor and microvm: the node offers
     * each, the first is its default (runtimeSetting, docs/runtimes.md).
     */
    runtime: string;
    /** Labels the node registers with, `name=value,...` (docs/cluster.md); the label routes add more. */
    labels: string;
    /** The microvm driver's guest kernel: vmlinuz and modules/ (scripts/guest-kernel.sh installs it). */
    guest_kernel_dir: string;
    /** The QEMU the microvm driver runs: a command on PATH or an absolute path (docs/runtimes.md, "QEMU 7.2 or 10"). */
    qemu_binary: string;
    /** Sandbox addresses come from this IPv4 pool, a /30 per sandbox. */
    address_pool: string;
    state_dir: string;
    /** Warm sandboxes a used template keeps at least (0: no warm pool). */
    warm_pool_size: number;
    /** What a template's pool starts with, within [warm_pool_size, warm_pool_max] (see warmPoolStart). */
    warm_pool_initial: number;
    warm_pool_max: number;
    host: {
      quota: {
        paused_resource_release_ratio: number;
        /** Sandboxes' nominal memory may add up to the node's memory times this (they rarely use it all). */
        memory_overcommit: number;
        /** Real memory (MB) admission keeps free for the host; 0: max(512, 5% of the node's memory). */
        memory_reserve_mb: number;
        /** No new sandbox while CPU pressure (PSI some avg10, %) is at or above this; 0: off. */
        max_cpu_pressure: number;
        /** Connections one sandbox may have tracked by the host at once (its new ones past it are dropped); 0: no limit. */
        max_connections_per_sandbox: number;
      };
    };
    capacity: { cpu_count: number; memory_mb: number };
    /** Volume plugins whose node hooks the agent calls; names match the master's. Empty: the master's list. */
    volume_plugins: VolumePluginConfig[];
    /** Where plugins put volumes' host mounts; an Attach answering a path outside it fails the create. */
    volume_plugin_base_dir: string;
  };
  proxy: {
    http_port: number;
    https_port: number;
    admin_port: number;
    bind: string;
    /** Proxy-side admin token ($svc_admin_token). */
    admin_token: string;
    /** PEM certificate chain and key for the HTTPS listener (https_port > 0). */
    tls_cert_file: string;
    tls_key_file: string;
    /** Worker processes of the data path, behind the same listeners; 0: one per core (docs/design.md, "Proxies on every core"). */
    workers: number;
    /** The workers' nice value, -20..19 (nginx's worker_priority); below 0 keeps previews responsive while sandboxes boot. */
    worker_priority: number;
    /**
     * The system account the workers run as once they listen, when svc runs as root (they parse
     * what the internet sends); '' keeps root. Default `nobody`.
     */
    worker_user: string;
  };
  template_center: {
    listen: string;
    addr: string;
    callback_token: string;
    insecure_no_token: boolean;
    artifact_dir: string;
    reconcile: { interval_sec: number; stale_after_sec: number };
    /** An S3-compatible artifact store; without an endpoint and a bucket artifacts stay on local disk. */
    s3: {
      endpoint: string; region: string; bucket: string; access_key_id: string; secret_access_key: string; session_token: string;
      prefix: string; force_path_style: boolean;
      /** Lifetime of presigned download URLs; 0: the store's default (37 days). */
      presign_expires_sec: number;
    };
    /** Image builds (pull and conversion) running at once; later ones wait, the teams taking turns. */
    max_concurrent_builds: number;
    /** Image layer blobs kept between builds: '' dir is <artifact_dir>/.blobs; 0 MB keeps nothing once a build ends. */
    blob_cache: { dir: string; max_mb: number };
    /** PEM of the egress root CA, baked into templates built with with_svc_ca; '': none yet. */
    ca_cert_file: string;
    /**
     * Registries that serve Docker Hub's images (Docker's `registry-mirrors`), comma-separated
     * URLs tried in order before Docker Hub, e.g. `http://mirror.internal:5000`.
     */
    registry_mirrors: string;
    /**
     * Registries on this host (loopback, or one of its addresses) or on a private network (RFC
     * 1918, CGNAT, fc00::/7) that builds may pull from, comma-separated `host:port` as images name
     * them, e.g. `localhost:5000`; `*`: any. '': none, so that a team cannot aim the template
     * center at the host's or the cluster's own services (docs/templates.md).
     */
    host_registries: string;
    /**
     * The most an image's layers may take, downloaded or unpacked, in MiB: a build past it fails.
     * A layer that claims a huge size, or a small one that unpacks to terabytes, filled the disk
     * shared with the database and every team's artifacts (docs/templates.md).
     */
    max_image_mb: number;
    /** `svc up` makes the code-interpreter-v1 template (docs/code-interpreter.md). */
    code_interpreter_template: boolean;
    /** `svc up` makes the mcp-gateway template, for the SDK's `Sandbox.create({ mcp })` (docs/mcp.md). */
    mcp_gateway_template: boolean;
  };
  /** The egress proxy (docs/egress.md): one per host, in the path of sandboxes that have layer-7 rules. */
  egress: {
    enabled: boolean;
    /** The sandbox-facing address the listeners bind; '': the first host address of node_agent.address_pool. */
    address: string;
    http_port: number;
    https_port: number;
    admin_bind: string;
    admin_port: number;
    /** Where the master and node agent reach the admin API; '': http://<admin_bind>:<admin_port>. */
    admin_addr: string;
    /** X-Svc-Admin-Token of the admin API and of the master's policy route; '': admin API closed. */
    admin_token: string;
    /** JSON Lines; '': <data_dir>/log/svc-egress/access.jsonl. */
    audit_log: string;
    /** The root CA (ca.pem, ca-key.pem), made when missing; '': <data_dir>/egress-ca. */
    ca_dir: string;
    /** Host overrides for upstream lookups, `host=ipv4` comma-separated (split-horizon names, tests). */
    resolve: string;
    /** PEM of CAs trusted for upstreams besides the system's. */
    upstream_ca_file: string;
    /** The listener that takes a tunneled sandbox's other TCP to its SOCKS5 proxy (E2B's `network.egressProxy`). */
    tunnel_port: number;
    /**
     * An operator-wide proxy every sandbox's outbound TCP goes through (a corporate proxy):
     * `socks5://[user:pass@]host:port` or `http://[user:pass@]host:port` (HTTP CONNECT); '': none.
     */
    upstream_proxy: string;
    /** Worker processes of the data path, behind the same listeners; 0: one per core (docs/design.md, "Proxies on every core"). */
    workers: number;
    /** The audit log rotates when it passes this many MiB; 0: never by size. */
    audit_max_mb: number;
    /** How many rotated audit files are kept (access.jsonl.1 … .N); older ones are deleted. */
    audit_keep: number;
    /**
     * Refuse the subnets attached to this host through interfaces other than the default
     * route's (a Docker bridge, libvirt, a CNI): the proxy dials from the host's namespace and
     * reached them though the kernel would not forward a sandbox's packets there.
     */
    refuse_attached_networks: boolean;
  };
  /** Lifecycle events and webhooks (docs/observability.md). */
  events: {
    /** How long events are kept, in days (E2B keeps 7). */
    retention_days: number;
    /** Comma-separated IPv4 CIDRs; when set, a webhook's URL must resolve inside them. '': any address but the platform's own and the sandbox pools. */
    webhook_allow_cidrs: string;
  };
  lifecycle: {
    replicas: number;
    /** First replica listens here, the next on port+1, ... */
    listen: string;
    sweep_interval_ms: number;
    warmup_sec: number;
    lease_ttl_ms: number;
  };
  redis: RedisConfig;
  /**
   * TLS on the components' own listeners (master, node agent, template center, lifecycle,
   * proxy admin, egress admin) and https:// in the addresses they give each other; both files
   * or neither (docs/cluster.md, "Traffic between components").
   */
  /**
   * The platform's internal token (docs/cluster.md, "Traffic between components"): every route of
   * the masters and the lifecycle replicas but their probes takes it in X-Svc-Cluster-Token, and
   * every component that calls them sends it. '': open, as before 2026-11-30.
   */
  cluster_token: string;
  cluster_tls: { cert_file: string; key_file: string };
}

export type DatabaseConfig =
  | { driver: 'sqlite'; path: string }
  | { driver: 'postgres'; url: string }
  | {
    driver: 'mysql'; host: string; port: number; user: string; password: string; database: string;
    /** TLS to the server, its certificate checked against the system's CAs and NODE_EXTRA_CA_CERTS (docs/cluster.md). */
    tls?: boolean;
  };

export interface RedisConfig {
  /** Empty host: embedded (in-process) coordination. */
  host: string;
  port: number;
  password: string;
  db: number;
  /** TLS to Redis, its certificate checked against the system's CAs and NODE_EXTRA_CA_CERTS (docs/cluster.md). */
  tls: boolean;
}

/** One `volume_plugins[]` entry (docs/volume-plugins.md). */
export interface VolumePluginConfig {
  name: string;
  type: 'binary' | 'rpc';
  /** binary: the executable, run once per hook. */
  binary_path?: string;
  /** rpc: a Unix socket path (bare, or unix:PATH), or host:port for TCP. */
  socket_path?: string;
  /** How long one hook may take before the call fails; default 30 000. */
  timeout_ms?: number;
}
