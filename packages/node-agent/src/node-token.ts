import type { FastifyInstance } from 'fastify';
import { parseListen, sameSecret, unauthorized, type Logger } from '@svc/common';
import { NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';

/** What answers without the token: load balancers' and Prometheus' probes, which carry no secret. */
const OPEN_PATHS = new Set(['/health', '/metrics']);

/**
 * node_agent.token on every other route (docs/cluster.md, "Traffic between components"): the
 * agent creates sandboxes, runs commands in them and opens any volume for whoever calls it, so
 * in a cluster anyone who reached its port owned every sandbox of the node. Sandboxes cannot
 * reach it (the platform's addresses are dropped in their chains); this keeps out the rest of
 * the network. Without a token it answers anyone, as before, and says so when it listens beyond
 * loopback.
 */
export function requireNodeToken(app: FastifyInstance, token: string, listen: string, logger: Logger): void {
  if (!token) {
    const { host } = parseListen(listen);
    if (!/^(127\.|::1$|localhost$)/.test(host)) {
      logger.warn({ listen }, 'node_agent.token is not set: anyone who reaches this port runs commands in this node\'s sandboxes; set it on every node agent and master');
    }
    return;
  }
  app.addHook('onRequest', async (req) => {
    const path = req.url.split('?')[0]!;
    if (OPEN_PATHS.has(path) && (req.method === 'GET' || req.method === 'HEAD')) return;
    const presented = req.headers[NODE_TOKEN_HEADER];
    if (typeof presented !== 'string' || !sameSecret(presented, token)) throw unauthorized(`${NODE_TOKEN_HEADER} must equal node_agent.token`);
  });
}
