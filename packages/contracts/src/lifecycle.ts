/**
 * The lifecycle manager's routes (first replica on 8083, the next on 8084, ...), in
 * LIFECYCLE_ROUTES below:
 *   GET  /health                           → LifecycleHealth
 *   GET  /metrics                          → the process's Prometheus metrics (text)
 *   POST /internal/resume                  → SandboxRoute once running (body { sandboxId })
 *        Concurrent resumes of one sandbox are coalesced. Failure: 503 with Retry-After, at once.
 *   POST /internal/v1/proxies/heartbeat    → 204 (body ProxyAnnouncement)
 * Every route but /health and /metrics takes cluster_token (cluster-token.ts) when it is set: 401.
 * Events it consumes from the coordination bus: topic `sandbox.events` (SandboxEvent).
 */
import { JsonClient, parseListen, type TaskStats } from '@svc/common';
import type { SandboxRoute } from './master-internal.ts';
import { answers, call, type RouteTable } from './route-table.ts';
import { METRICS_ROUTE } from './metrics-route.ts';
import { clusterHeaders } from './cluster-token.ts';

export interface LifecycleHealth {
  ok: true;
  replicaId: string;
  leader: boolean;
  warmingUp: boolean;
  /** `sandbox.created` events this replica applied since it started. */
  createEventsApplied: number;
  /** How the replica's background tasks fare (the idle sweep). */
  tasks: Record<string, TaskStats>;
}

/** What a proxy announces (a type, not an interface: it is what the heartbeat route's schema takes). */
export type ProxyAnnouncement = {
  /** 1-128 characters of [A-Za-z0-9._:-]: it names the proxy's key in the coordination kv. */
  proxyId: string;
  /** Base URL of the proxy's admin API (cache purge, healthz). */
  adminUrl: string;
};

/**
 * The lifecycle manager's routes (route-table.ts): its server registers them, LifecycleClient
 * calls them. The schemas refuse a body of another shape with a 400 naming the field; a body's
 * other fields are let through, unread.
 */
export const LIFECYCLE_ROUTES = {
  health: { method: 'GET', path: '/health', answer: answers<LifecycleHealth>() },
  /** The process's Prometheus metrics (docs/observability.md). */
  metrics: METRICS_ROUTE,
  resume: {
    method: 'POST',
    path: '/internal/resume',
    body: { type: 'object', required: ['sandboxId'], properties: { sandboxId: { type: 'string', minLength: 1 } } },
    answer: answers<SandboxRoute>(),
  },
  proxyHeartbeat: {
    method: 'POST',
    path: '/internal/v1/proxies/heartbeat',
    body: {
      type: 'object',
      required: ['proxyId', 'adminUrl'],
      properties: {
        proxyId: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
        adminUrl: { type: 'string', pattern: '^https?://[^\\s/]+' },
      },
    },
    answer: answers<void>(),
  },
} as const satisfies RouteTable;

/**
 * Announced proxies in the coordination kv (Coordination has no key listing, hence an index):
 *   `proxy:<proxyId>` → the proxy's adminUrl, with a TTL of PROXY_TTL_MS, refreshed by each heartbeat;
 *                       a proxy that stops announcing drops out when it expires.
 *   `proxies`         → JSON array of proxyIds, no TTL. Read-modify-written under the lock
 *                       PROXY_INDEX_LOCK; ids whose `proxy:<id>` entry expired are pruned on each
 *                       rewrite and skipped when listing. An id lost to a racing writer comes back
 *                       with that proxy's next heartbeat.
 */
export const PROXY_KV_PREFIX = 'proxy:';
export const PROXY_INDEX_KEY = 'proxies';
export const PROXY_INDEX_LOCK = 'lc:proxy-index';
export const PROXY_TTL_MS = 15_000;

export const SANDBOX_EVENTS_TOPIC = 'sandbox.events';
export type SandboxEventKind = 'sandbox.created' | 'sandbox.paused' | 'sandbox.resumed' | 'sandbox.killed';
export interface SandboxEvent {
  kind: SandboxEventKind;
  sandboxId: string;
  at: string;
  reason?: string;
}

/** Replica i listens on `lifecycle.listen` with the port plus i (port 0: every replica picks a free port). */
export function lifecycleReplicaListen(listen: string, index: number): { host: string; port: number } {
  const { host, port } = parseListen(listen);
  return { host, port: port === 0 ? 0 : port + index };
}

/** Base URLs of all configured replicas, as the data-plane proxy calls them. */
export function lifecycleReplicaUrls(lc: { listen: string; replicas: number }, scheme: 'http' | 'https' = 'http'): string[] {
  const urls: string[] = [];
  for (let i = 0; i < lc.replicas; i++) {
    const { host, port } = lifecycleReplicaListen(lc.listen, i);
    const h = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
    urls.push(`${scheme}://${h}:${port}`);
  }
  return urls;
}

const R = LIFECYCLE_ROUTES;

export class LifecycleClient {
  private readonly http: JsonClient;
  constructor(baseUrl: string, opts: { timeoutMs?: number; clusterToken?: string } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 60_000, headers: clusterHeaders(opts.clusterToken) });
  }
  get baseUrl() { return this.http.baseUrl; }
  health() { return call(this.http, R.health, {}, { timeoutMs: 2_000 }); }
  resume(sandboxId: string, timeoutMs?: number) { return call(this.http, R.resume, {}, { body: { sandboxId }, timeoutMs }); }
  announceProxy(a: ProxyAnnouncement) { return call(this.http, R.proxyHeartbeat, {}, { body: a, timeoutMs: 2_000 }); }
}
