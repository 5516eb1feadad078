/**
 * The egress proxy's admin routes and the master's policy route it loads from, as route tables
 * (route-table.ts), with their clients (egress.ts holds the shapes and the rule checks).
 */
import { JsonClient } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER, type EgressHealth, type PlatformAddresses, type SandboxEgressPolicy, type SandboxEgressPolicyView } from './egress.ts';
import { EgressPoliciesQuery } from './master-schemas.ts';
import { answers, call, type RouteTable } from './route-table.ts';
import { METRICS_ROUTE } from './metrics-route.ts';
import { clusterHeaders } from './cluster-token.ts';

/**
 * A policy's wire shape as the admin route takes it (PUT /admin/policies/:sandboxId): its fields'
 * types, other fields let through unread. What is inside them (an IPv4 address, the rules' and
 * transforms' constraints, CIDRs) the proxy checks as it checks every policy it loads
 * (egress/src/policy-check.ts, with checkEgressRules), a 400 as well.
 */
const EgressPolicyBody = {
  type: 'object',
  required: ['sandboxId', 'address'],
  properties: {
    sandboxId: { type: 'string', minLength: 1, maxLength: 128 },
    teamId: { type: ['string', 'null'], minLength: 1, maxLength: 128 },
    address: { type: 'string' },
    // Absent or null: no rules.
    rules: { type: ['array', 'null'] },
    tunnel: { type: ['object', 'null'] },
    fallback: {
      type: ['object', 'null'],
      required: ['allowInternetAccess'],
      properties: {
        allowInternetAccess: { type: 'boolean' },
        allowOut: { type: ['array', 'null'], items: { type: 'string' } },
        denyOut: { type: ['array', 'null'], items: { type: 'string' } },
      },
    },
    transforms: { type: ['array', 'null'] },
  },
} as const;

/**
 * The egress proxy's admin routes (route-table.ts): its admin server registers them,
 * EgressAdminClient (the master's policy pushes) calls them.
 */
export const EGRESS_ADMIN_ROUTES = {
  health: { method: 'GET', path: '/admin/healthz', answer: answers<EgressHealth>() },
  /** The process's Prometheus metrics; the admin token as the policy routes (docs/observability.md). */
  metrics: METRICS_ROUTE,
  listPolicies: { method: 'GET', path: '/admin/policies', answer: answers<SandboxEgressPolicyView[]>() },
  getPolicy: { method: 'GET', path: '/admin/policies/:sandboxId', answer: answers<SandboxEgressPolicyView>() },
  putPolicy: { method: 'PUT', path: '/admin/policies/:sandboxId', body: EgressPolicyBody, answer: answers<SandboxEgressPolicyView>() },
  deletePolicy: { method: 'DELETE', path: '/admin/policies/:sandboxId', answer: answers<void>() },
} as const satisfies RouteTable;

const R = EGRESS_ADMIN_ROUTES;

export class EgressAdminClient {
  private readonly http: JsonClient;
  constructor(baseUrl: string, adminToken: string, timeoutMs = 3_000) {
    this.http = new JsonClient(baseUrl, { timeoutMs, headers: adminToken ? { [EGRESS_ADMIN_TOKEN_HEADER]: adminToken } : {} });
  }
  health() { return call(this.http, R.health, {}); }
  list() { return call(this.http, R.listPolicies, {}); }
  get(sandboxId: string) { return call(this.http, R.getPolicy, { sandboxId }); }
  put(policy: SandboxEgressPolicy) { return call(this.http, R.putPolicy, { sandboxId: policy.sandboxId }, { body: policy }); }
  delete(sandboxId: string) { return call(this.http, R.deletePolicy, { sandboxId }); }
}

/**
 * The master's routes the egress proxy calls (X-Svc-Admin-Token): its node's policies at start,
 * inject secrets included, and the platform's own addresses, again every half minute. The master
 * registers them, EgressPolicySource calls them.
 */
export const MASTER_EGRESS_ROUTES = {
  policies: { method: 'GET', path: '/internal/v1/egress/policies', query: EgressPoliciesQuery, answer: answers<SandboxEgressPolicy[]>() },
  /** Where the platform's own components listen, as addresses (PlatformAddresses): the egress proxy never connects there for a sandbox. */
  platformAddresses: { method: 'GET', path: '/internal/v1/egress/platform-addresses', answer: answers<PlatformAddresses>() },
} as const satisfies RouteTable;

/** The proxy's view of the master: every policy of its node, loaded at start, and the platform's addresses. */
export class EgressPolicySource {
  private readonly http: JsonClient;
  constructor(masterUrl: string, adminToken: string, opts: { clusterToken?: string } = {}) {
    this.http = new JsonClient(masterUrl, { timeoutMs: 10_000, headers: { ...clusterHeaders(opts.clusterToken), ...(adminToken ? { [EGRESS_ADMIN_TOKEN_HEADER]: adminToken } : {}) } });
  }
  policies(nodeId: string) { return call(this.http, MASTER_EGRESS_ROUTES.policies, {}, { query: { nodeId } }); }
  platformAddresses() { return call(this.http, MASTER_EGRESS_ROUTES.platformAddresses, {}); }
}
