/**
 * The lifecycle manager's routes (first replica on 8083, the next on 8084, ...):
 *   GET  /health                           → LifecycleHealth
 *   POST /internal/resume                  → SandboxRoute once running (body { sandboxId })
 *        Concurrent resumes of one sandbox are coalesced. Failure: 503 with Retry-After, at once.
 *   POST /internal/v1/proxies/heartbeat    → 204 (body ProxyAnnouncement)
 * Events it consumes from the coordination bus: topic `sandbox.events` (SandboxEvent).
 */
import { JsonClient, parseListen, type TaskStats } from '@svc/common';
import type { SandboxRoute } from './master-internal.ts';

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

export interface ProxyAnnouncement {
  proxyId: string;
  /** Base URL of the proxy's admin API (cache purge, healthz). */
  adminUrl: string;
}

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

export class LifecycleClient {
  private readonly http: JsonClient;
  constructor(baseUrl: string, opts: { timeoutMs?: number } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 60_000 });
  }
  get baseUrl() { return this.http.baseUrl; }
  health() { return this.http.get<LifecycleHealth>('/health', { timeoutMs: 2_000 }); }
  resume(sandboxId: string, timeoutMs?: number) {
    return this.http.post<SandboxRoute>('/internal/resume', { sandboxId }, { timeoutMs });
  }
  announceProxy(a: ProxyAnnouncement) { return this.http.post<void>('/internal/v1/proxies/heartbeat', a, { timeoutMs: 2_000 }); }
}
