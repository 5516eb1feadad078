/**
 * Conversions between the SDK's sandbox options and results and the API's wire shapes.
 */
import { timeoutToSeconds } from './config.ts';
import { InvalidArgumentError } from './errors.ts';
import { buildNetwork } from './network.ts';
import type { SandboxInfo, SandboxLogEntry, SandboxMetrics, SandboxOpts, SnapshotInfo, VolumeMountTarget } from './types.ts';
import type { WireListedSandbox, WireNewSandbox, WireSandboxDetail, WireSandboxLogEntry, WireSandboxMetric, WireSnapshotInfo, WireVolumeMount } from './wire.ts';

export function buildCreateBody(template: string, opts: SandboxOpts = {}): WireNewSandbox {
  const body: WireNewSandbox = { templateID: template };
  if (opts.timeoutMs !== undefined) body.timeout = timeoutToSeconds(opts.timeoutMs);
  if (opts.metadata) body.metadata = opts.metadata;
  if (opts.envs) body.envVars = opts.envs;
  if (opts.secure !== undefined) body.secure = opts.secure;
  if (opts.allowInternetAccess !== undefined) body.allow_internet_access = opts.allowInternetAccess;
  const network = buildNetwork(opts.network);
  if (network) body.network = network;
  if (opts.lifecycle) {
    const { lifecycle, keepMemory } = buildLifecycle(opts.lifecycle);
    body.lifecycle = lifecycle;
    // e2b's field for the kind of the timeout's pause; sent only when asked for, as e2b does
    if (keepMemory !== undefined) body.autoPauseMemory = keepMemory;
  }
  if (opts.volumeMounts) body.volumeMounts = buildVolumeMounts(opts.volumeMounts);
  if (opts.cpuCount !== undefined) body.cpuCount = opts.cpuCount;
  if (opts.memoryMB !== undefined) body.memoryMB = opts.memoryMB;
  if (opts.runtime !== undefined) body.runtime = opts.runtime;
  if (opts.nodeSelector && Object.keys(opts.nodeSelector).length) body.nodeSelector = opts.nodeSelector;
  if (opts.iam && Object.keys(opts.iam.tokens).length) body.iam = { tokens: opts.iam.tokens };
  return body;
}

/** The lifecycle as sent, and the kind of the timeout's pause when one was asked for. */
function buildLifecycle(l: NonNullable<SandboxOpts['lifecycle']>): { lifecycle: NonNullable<WireNewSandbox['lifecycle']>; keepMemory?: boolean } {
  const onTimeout: unknown = l.onTimeout;
  const isObject = typeof onTimeout === 'object' && onTimeout !== null;
  const action: unknown = isObject ? (onTimeout as { action?: unknown }).action : onTimeout;
  if (onTimeout !== undefined && action !== 'kill' && action !== 'pause') {
    const what = isObject ? 'lifecycle.onTimeout.action' : 'lifecycle.onTimeout';
    throw new InvalidArgumentError(`${what} must be 'kill' or 'pause' (got ${JSON.stringify(action)})`);
  }
  const keepMemory = isObject ? (onTimeout as { keepMemory?: unknown }).keepMemory : undefined;
  if (keepMemory !== undefined && typeof keepMemory !== 'boolean') {
    throw new InvalidArgumentError(`lifecycle.onTimeout.keepMemory must be a boolean (got ${JSON.stringify(keepMemory)})`);
  }
  if (keepMemory !== undefined && action !== 'pause') {
    throw new InvalidArgumentError("lifecycle.onTimeout.keepMemory is only allowed when the action is 'pause'");
  }
  if (l.autoResume && action !== 'pause') {
    throw new InvalidArgumentError("lifecycle.autoResume can only be true when onTimeout is 'pause'");
  }
  if (l.autoResume && keepMemory === false) {
    throw new InvalidArgumentError(
      'lifecycle.autoResume cannot be true with onTimeout.keepMemory false: a sandbox paused without its memory '
      + 'boots again from its files, so traffic does not resume it; resume it with Sandbox.connect()',
    );
  }
  const lifecycle: NonNullable<WireNewSandbox['lifecycle']> = {};
  if (action !== undefined) lifecycle.onTimeout = action as 'kill' | 'pause';
  if (l.autoResume !== undefined) lifecycle.autoResume = l.autoResume;
  return keepMemory === undefined ? { lifecycle } : { lifecycle, keepMemory };
}

function buildVolumeMounts(mounts: NonNullable<SandboxOpts['volumeMounts']>): WireVolumeMount[] {
  const list: WireVolumeMount[] = Array.isArray(mounts)
    ? mounts.map((m) => mountOf((m as { path?: unknown } | null)?.path, m))
    : Object.entries(mounts).map(([path, target]) => mountOf(path, target));
  const seen = new Set<string>();
  for (const m of list) {
    if (!m.name) throw new InvalidArgumentError(`volume mount at ${m.path}: a volume name is required`);
    if (!m.path.startsWith('/')) throw new InvalidArgumentError(`volume mount path must be absolute (got ${JSON.stringify(m.path)})`);
    if (seen.has(m.name)) throw new InvalidArgumentError(`volume ${m.name} is mounted twice; a sandbox may attach a volume only once`);
    seen.add(m.name);
  }
  return list;
}

/**
 * One mount as sent. A `Volume` (anything with a `volumeId`) goes by its id: the server reads a
 * mount's name as a volume id first, then as the team's volume name, so the id is unambiguous.
 */
function mountOf(path: unknown, target: VolumeMountTarget | { name: string; path: string; readOnly?: boolean }): WireVolumeMount {
  if (typeof path !== 'string') throw new InvalidArgumentError(`volume mount path must be a string (got ${JSON.stringify(path)})`);
  if (typeof target === 'string') return { name: target, path };
  const t = (typeof target === 'object' && target !== null ? target : {}) as { volumeId?: unknown; name?: unknown; readOnly?: unknown };
  const name = typeof t.volumeId === 'string' ? t.volumeId : t.name;
  if (typeof name !== 'string') {
    throw new InvalidArgumentError(`volume mount at ${path}: give a volume id or name, a Volume or VolumeMount(volume) (got ${typeof target === 'object' && target !== null ? 'an object with no volumeId or name' : JSON.stringify(target)})`);
  }
  return { name, path, ...(t.readOnly ? { readOnly: true } : {}) };
}

/** A listed sandbox, or one sandbox's detail (which adds its domain, network and lifecycle). */
export function toSandboxInfo(d: WireListedSandbox & Partial<Pick<WireSandboxDetail, 'domain' | 'allowInternetAccess' | 'network' | 'lifecycle'>>): SandboxInfo {
  const info: SandboxInfo = {
    sandboxId: d.sandboxID,
    templateId: d.templateID,
    metadata: d.metadata,
    startedAt: new Date(d.startedAt),
    state: d.state,
    cpuCount: d.cpuCount,
    memoryMB: d.memoryMB,
    envdVersion: d.envdVersion,
    volumeMounts: d.volumeMounts,
  };
  if (d.alias) info.name = d.alias;
  if (d.endAt) info.endAt = new Date(d.endAt);
  info.diskSizeMB = d.diskSizeMB;
  if (d.allowInternetAccess !== undefined && d.allowInternetAccess !== null) info.allowInternetAccess = d.allowInternetAccess;
  if (d.network) info.network = d.network;
  if (d.lifecycle) info.lifecycle = { onTimeout: d.lifecycle.onTimeout, autoResume: d.lifecycle.autoResume };
  if (d.domain) info.sandboxDomain = d.domain;
  if (d.pauseKind) info.pauseKind = d.pauseKind;
  if (d.runtime) info.runtime = d.runtime;
  info.timeout = d.timeout;
  return info;
}

export function toSandboxMetrics(m: WireSandboxMetric): SandboxMetrics {
  return {
    timestamp: new Date(m.timestamp),
    cpuUsedPct: m.cpuUsedPct,
    cpuCount: m.cpuCount,
    memUsed: m.memUsed,
    memTotal: m.memTotal,
    memCache: m.memCache ?? 0,
    diskUsed: m.diskUsed,
    diskTotal: m.diskTotal,
  };
}

export function toSandboxLogEntry(e: WireSandboxLogEntry): SandboxLogEntry {
  return { timestamp: new Date(e.timestamp), level: e.level, message: e.message, fields: e.fields };
}

export function toSnapshotInfo(s: WireSnapshotInfo): SnapshotInfo {
  return { snapshotId: s.snapshotID, names: s.names ?? [] };
}
