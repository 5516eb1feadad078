import type { FastifyInstance } from 'fastify';
import { unauthorized } from './errors.ts';
import { parseListen } from './http-server.ts';
import type { Logger } from './log.ts';
import { sameSecret } from './secrets.ts';

/** What answers without a component token: load balancers' and Prometheus' probes, which carry no secret. */
export interface SharedTokenGuard {
  /** The secret; '' leaves every route open (as before the token existed). */
  token: string;
  /** The request header that carries it (lower case). */
  header: string;
  /** The configuration key, named in the 401 and the warning. */
  setting: string;
  /** GET and HEAD of these paths pass without it. */
  openPaths: string[];
  /** Where the server listens: an unset token is only warned of beyond loopback. */
  listen: string;
  /** What anyone who reaches the port could do without it, for the warning. */
  exposure: string;
  logger: Logger;
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
    const { host } = parseListen(g.listen);
    if (!/^(127\.|::1$|localhost$)/.test(host)) {
      g.logger.warn({ listen: g.listen }, `${g.setting} is not set: anyone who reaches this port ${g.exposure}; set it on every host of the platform`);
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
