import type { FastifyInstance } from 'fastify';
import { ConfigError } from './config-error.ts';
import { unauthorized } from './errors.ts';
import { parseListen } from './listen-address.ts';
import { isLoopbackHost } from './ip-address.ts';
import { sameSecret } from './secrets.ts';

/** What answers without a component token: load balancers' and Prometheus' probes, which carry no secret. */
export interface SharedTokenGuard {
  /** The secret; '' leaves every route open, allowed only on a loopback listener. */
  token: string;
  /** The request header that carries it (lower case). */
  header: string;
  /** The configuration key, named in the 401 and the configuration error. */
  setting: string;
  /** GET and HEAD of these paths pass without it. */
  openPaths: string[];
  /** Where the server listens: beyond loopback an unset token is a configuration error. */
  listen: string;
  /** What anyone who reaches the port could do without it, for the configuration error. */
  exposure: string;
}

/**
 * A component's shared token on every route but its probes (docs/cluster.md, "Traffic between
 * components"): node agents take node_agent.token, the masters and the lifecycle replicas
 * cluster_token. Sandboxes never reach these ports (the platform's addresses are dropped in
 * their chains); the token keeps out the rest of the network. The check runs on every request
 * before routing, so a wrong token learns nothing of which routes exist.
 */
export function requireSharedToken(app: FastifyInstance, g: SharedTokenGuard): void {
  if (!g.token) {
    // Fail closed: a unit started without its environment file (systemd's `EnvironmentFile=-`
    // skips a missing one) served everyone on the network as the platform itself, with a warning
    // in a log nobody read (docs/cluster.md, "Traffic between components").
    if (!isLoopbackHost(parseListen(g.listen).host)) {
      throw new ConfigError(g.setting, `is not set, and ${g.listen} is not a loopback address: anyone who reaches this port ${g.exposure}. Set it on every host of the platform, or listen on loopback`);
    }
    return;
  }
  const open = new Set(g.openPaths);
  app.addHook('onRequest', async (req) => {
    const path = req.url.split('?')[0]!;
    if (open.has(path) && (req.method === 'GET' || req.method === 'HEAD')) return;
    const presented = req.headers[g.header];
    if (typeof presented !== 'string' || !sameSecret(presented, g.token)) throw unauthorized(`${g.header} must equal ${g.setting}`);
  });
}
