/**
 * The public REST's sandbox shapes as the sandbox pages read them (packages/contracts/src/
 * public-api-schemas.ts and events.ts). Written out here rather than imported: the contracts
 * package pulls Node modules that a browser bundle must not type-check against.
 */

type LiveState = 'running' | 'paused';
export type SandboxState = LiveState | 'ended';

interface MountedVolume { name: string; path: string; readOnly?: boolean }

/** ListedSandbox: a row of GET /v2/sandboxes. */
export interface ListedSandbox {
  sandboxID: string;
  templateID: string;
  alias?: string;
  clientID: string;
  startedAt: string;
  endAt?: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  metadata: Record<string, string>;
  state: LiveState;
  envdVersion: string;
  volumeMounts: MountedVolume[];
  pauseKind?: 'freeze' | 'snapshot' | 'filesystem';
  runtime?: 'gvisor' | 'microvm';
  timeout: number;
}

/** SandboxDetail: GET /sandboxes/{id}. */
export interface SandboxDetail extends ListedSandbox {
  domain: string;
  allowInternetAccess: boolean | null;
  network: { allowOut: string[]; denyOut: string[]; allowPublicTraffic: boolean; maskRequestHost?: string; rules?: unknown };
  lifecycle: { onTimeout: 'kill' | 'pause'; autoResume: boolean };
}

/** SandboxMetric: one 5 s sample of a sandbox. */
export interface SandboxMetric {
  timestamp: string;
  timestampUnix: number;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache?: number;
  diskUsed: number;
  diskTotal: number;
}

export interface SandboxLogEntry {
  timestamp: string;
  level: 'debug' | 'info' | 'warn' | 'error';
  message: string;
  fields: Record<string, string>;
}

export interface SandboxEvent {
  id: string;
  type: string;
  eventData: {
    set_timeout?: string;
    execution?: { started_at: string; vcpu_count: number; memory_mb: number; execution_time: number };
    sandbox_metadata?: Record<string, string>;
    snapshot_id?: string;
    reason?: string;
  } | null;
  sandboxId: string;
  sandboxExecutionId: string;
  sandboxTemplateId: string;
  timestamp: string;
}

/** The widest timeout the API takes (E2B's int32, docs/api.md "Limits"). */
export const MAX_TIMEOUT_SECONDS = 2_147_483_647;

/** The most ids GET /sandboxes/metrics takes in one call (its `sandbox_ids`: at most 100). */
export const METRICS_IDS_PER_CALL = 100;

/** The most events one GET /events/... answers (EVENT_LIMITS.listMax). */
export const EVENTS_PER_CALL = 100;

/** "sandbox.lifecycle.killed" → "killed". */
export function eventName(type: string): string {
  return type.replace(/^sandbox\.lifecycle\./, '');
}
