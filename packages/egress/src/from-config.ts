import { readFileSync } from 'node:fs';
import { clusterTlsOf, egressAddressOf, parseEgressResolve, parseUpstreamProxy, type Logger, type SvcConfig } from '@svc/common';
import { EgressPolicySource } from '@svc/contracts/egress-routes';
import { SecretResolverClient } from '@svc/contracts/secrets';
import { IdentityMintClient } from '@svc/contracts/identity';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';

export interface EgressFromConfigOptions {
  logger: Logger;
  /** The node whose sandboxes this proxy serves: it loads their policies from the master at start. */
  nodeId: string;
  /** Default `master.addr`. */
  masterAddr?: string;
}

/** The egress proxy as `svc up` and `svc egress` run it: every setting from the configuration (docs/egress.md). */
export function startEgressFromConfig(cfg: SvcConfig, o: EgressFromConfigOptions): Promise<EgressProxy> {
  const eg = cfg.egress;
  const source = new EgressPolicySource(o.masterAddr ?? cfg.master.addr, eg.admin_token);
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
    ...(eg.upstream_ca_file ? { upstreamCa: readFileSync(eg.upstream_ca_file, 'utf8') } : {}),
    policySource: () => source.policies(o.nodeId),
    placeholders: {
      secrets: new SecretResolverClient(o.masterAddr ?? cfg.master.addr, eg.admin_token),
      tokens: new IdentityMintClient(o.masterAddr ?? cfg.master.addr, eg.admin_token),
    },
    logger: o.logger,
  });
}
