/**
 * The lifecycle manager's routes (first replica on 8083, the next on 8084, ...):
 *   GET  /health                           → LifecycleHealth
 *   POST /internal/resume                  → SandboxRoute once running (body { sandboxId })
 *        Concurrent resumes of one sandbox are coalesced. Failure: 503 with Retry-After, at once.
 *   POST /internal/v1/proxies/heartbeat    → 204 (body ProxyAnnouncement)
 * Events it consumes from the coordination bus: topic `sandbox.events` (SandboxEvent).
 */
import { JsonClient } from '@svc/common';
import type { SandboxRoute } from '@svc/master/internal-api';

export interface LifecycleHealth {
  ok: true;
  replicaId: string;
  leader: boolean;
  warmingUp: boolean;
}

export interface ProxyAnnouncement {
  proxyId: string;
  /** Base URL of the proxy's admin API (cache purge, healthz). */
  adminUrl: string;
}

/** Key prefix under which announced proxies are kept in the coordination store (value: adminUrl). */
export const PROXY_KV_PREFIX = 'proxy:';
export const PROXY_INDEX_KEY = 'proxies';

export const SANDBOX_EVENTS_TOPIC = 'sandbox.events';
export type SandboxEventKind = 'sandbox.created' | 'sandbox.paused' | 'sandbox.resumed' | 'sandbox.killed';
export interface SandboxEvent {
  kind: SandboxEventKind;
  sandboxId: string;
  at: string;
  reason?: string;
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
