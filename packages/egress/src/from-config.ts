import { readFileSync } from 'node:fs';
import { clusterTlsOf, egressAddressOf, parseEgressResolve, parseUpstreamProxy, workerCount, type Logger, type SvcConfig, type WorkerEntry } from '@svc/common';
import { EgressPolicySource } from '@svc/contracts/egress-routes';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';

export interface EgressFromConfigOptions {
  logger: Logger;
  /** The node whose sandboxes this proxy serves: it loads their policies from the master at start. */
  nodeId: string;
  /** Default `master.addr`. */
  masterAddr?: string;
  /**
   * What a worker process runs (sameProgramEntry() from the CLI): given, the data path runs in
   * `egress.workers` worker processes (0: one per core); absent, in this process.
   */
  workerEntry?: WorkerEntry;
}

/** The egress proxy as `svc up` and `svc egress` run it: every setting from the configuration (docs/egress.md). */
export function startEgressFromConfig(cfg: SvcConfig, o: EgressFromConfigOptions): Promise<EgressProxy> {
  const eg = cfg.egress;
  const masterAddr = o.masterAddr ?? cfg.master.addr;
  const source = new EgressPolicySource(masterAddr, eg.admin_token, { clusterToken: cfg.cluster_token });
  return startEgressProxy({
    bind: eg.address || egressAddressOf(cfg.node_agent.address_pool),
    httpPort: eg.http_port,
    httpsPort: eg.https_port,
    tunnelPort: eg.tunnel_port,
    upstreamProxy: parseUpstreamProxy(eg.upstream_proxy),
    adminBind: eg.admin_bind,
    adminPort: eg.admin_port,
    adminToken: eg.admin_token,
    adminHttps: clusterTlsOf(cfg),
    caDir: eg.ca_dir,
    auditLogPath: eg.audit_log,
    auditMaxBytes: eg.audit_max_mb * 1024 * 1024,
    auditKeep: eg.audit_keep,
    resolve: parseEgressResolve(eg.resolve),
    platformGuard: { sandboxPool: cfg.node_agent.address_pool, refuseAttachedNetworks: cfg.egress.refuse_attached_networks },
    ...(eg.upstream_ca_file ? { upstreamCa: readFileSync(eg.upstream_ca_file, 'utf8') } : {}),
    policySource: () => source.policies(o.nodeId),
    placeholderSource: { masterAddr, token: eg.admin_token, clusterToken: cfg.cluster_token },
    ...(o.workerEntry ? { workers: { count: workerCount(eg.workers), entry: o.workerEntry } } : {}),
    logger: o.logger,
  });
}
