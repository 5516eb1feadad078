import { parseListen, parseUpstreamProxy, type SvcConfig } from '@svc/common';
import { WILDCARDS, type Endpoint } from './webhook-target.ts';

/**
 * Where the platform's own components listen, from the configuration and the registered nodes:
 * what a webhook may not point at (webhook-target.ts), and what a sandbox never reaches (the
 * egress proxy and each node's firewall). Names are left as written; a listen address of 0.0.0.0
 * stands for every address of this host. Such a port is also taken on each node's host: every
 * component reads the one configuration file (docs/cluster.md), and a cluster may run the
 * control components beside each node agent, where that listen binds the node's addresses.
 */
export function platformEndpoints(cfg: SvcConfig, nodeAddresses: () => Promise<string[]>): () => Promise<Endpoint[]> {
  const fixed: Endpoint[] = [];
  const onEveryHost = new Set<number>();
  const add = (host: string, port: number) => {
    if (port <= 0) return;
    fixed.push({ host, port });
    if (WILDCARDS.has(host)) onEveryHost.add(port);
  };
  const listen = (l: string) => { if (l) { const { host, port } = parseListen(l); add(host, port); } };
  const url = (u: string) => { if (u) addUrl(u, add); };
  listen(cfg.api.listen);
  listen(cfg.master.listen);
  url(cfg.master.addr);
  listen(cfg.node_agent.listen);
  url(cfg.node_agent.addr);
  for (const port of [cfg.proxy.http_port, cfg.proxy.https_port, cfg.proxy.admin_port]) add(cfg.proxy.bind, port);
  add(cfg.egress.admin_bind, cfg.egress.admin_port);
  url(cfg.egress.admin_addr);
  if (cfg.egress.address) for (const port of [cfg.egress.http_port, cfg.egress.https_port, cfg.egress.tunnel_port]) add(cfg.egress.address, port);
  // The operator's own proxy (egress.upstream_proxy) dials from the operator's network: a sandbox
  // that named it as its own egressProxy would have it open what the egress proxy refuses for
  // the sandbox (the metadata service, the database), so it is the platform's and refused there.
  const operatorProxy = upstreamProxyOf(cfg.egress.upstream_proxy);
  if (operatorProxy) add(operatorProxy.host, operatorProxy.port);
  listen(cfg.template_center.listen);
  url(cfg.template_center.addr);
  if (cfg.lifecycle.listen) {
    const { host, port } = parseListen(cfg.lifecycle.listen);
    for (let i = 0; i < Math.max(1, cfg.lifecycle.replicas); i++) add(host, port + i);
  }
  const db = cfg.master.database;
  if (db.driver === 'postgres') addUrl(db.url, add, 5432);
  if (db.driver === 'mysql') add(db.host, db.port);
  if (cfg.redis.host) add(cfg.redis.host, cfg.redis.port);
  return async () => {
    const nodes: Endpoint[] = [];
    for (const a of await nodeAddresses()) {
      addUrl(a, (host, port) => {
        nodes.push({ host, port });
        for (const p of onEveryHost) if (p !== port) nodes.push({ host, port: p });
      });
    }
    return [...fixed, ...nodes];
  };
}

/** egress.upstream_proxy's host and port; the configuration check refused a malformed one before this runs. */
function upstreamProxyOf(raw: string): { host: string; port: number } | undefined {
  try {
    return parseUpstreamProxy(raw);
  } catch {
    // Not reached after the configuration check; a value it let through that is no proxy names no endpoint.
    return undefined;
  }
}

function addUrl(raw: string, add: (host: string, port: number) => void, defaultPort?: number): void {
  try {
    const u = new URL(raw.includes('://') ? raw : `http://${raw}`);
    const port = Number(u.port || defaultPort || (u.protocol === 'https:' ? 443 : 80));
    add(u.hostname.replace(/^\[|\]$/g, ''), port);
  } catch {
    // An address the configuration check let through that is no URL names no endpoint to guard.
  }
}
