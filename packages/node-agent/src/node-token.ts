import type { FastifyInstance } from 'fastify';
import { requireSharedToken } from '@svc/common';
import { NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';

/**
 * node_agent.token on every route but /health and /metrics (docs/cluster.md, "Traffic between
 * components"): the agent creates sandboxes, runs commands in them and opens any volume for
 * whoever calls it, so in a cluster anyone who reached its port owned every sandbox of the node.
 */
export function requireNodeToken(app: FastifyInstance, token: string, listen: string): void {
  requireSharedToken(app, {
    token, header: NODE_TOKEN_HEADER, setting: 'node_agent.token', openPaths: ['/health', '/metrics'], listen,
    exposure: 'runs commands in this node\'s sandboxes',
  });
}
