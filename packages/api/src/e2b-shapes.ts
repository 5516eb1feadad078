import type { EgressTunnel } from '@svc/contracts/egress';
/**
 * Translation between the public wire (@svc/contracts: E2B's shapes and svc's spellings of them)
 * and the master's records. Types and ranges are checked by the gateway against the contract
 * before these run; what is left here is what a schema cannot say: which spelling wins, and
 * rules that tie two fields together.
 */
import { badRequest } from '@svc/common';
import type {
  WireListedSandbox, WireNewSandbox, WireSandbox, WireSandboxDetail, WireSandboxLogs, WireSandboxMetric, WireSnapshotInfo, WireVolumeMount,
} from '@svc/contracts';
import type { CreateSandboxInput, SandboxRecord, SnapshotRecord, VolumeMount } from '@svc/contracts/master';
import type { SandboxLogEntry, SandboxMetrics } from '@svc/contracts/node-agent';
import { e2bLogLine } from '@svc/contracts/sandbox-logs';

export function parseNewSandbox(body: WireNewSandbox): CreateSandboxInput {
  const lc = body.lifecycle ?? {};
  let onTimeout = lc.on_timeout ?? lc.onTimeout;
  if (onTimeout === undefined && body.autoPause !== undefined) onTimeout = body.autoPause ? 'pause' : 'kill';
  const ar = body.autoResume;
  const autoResume = lc.auto_resume ?? lc.autoResume ?? (typeof ar === 'boolean' ? ar : ar?.enabled);
  if (autoResume && onTimeout !== 'pause') throw badRequest('auto_resume needs on_timeout=pause');
  // The master refuses it together with autoResume (master/src/sandboxes/create-input.ts).
  const pauseMemory = lc.keep_memory ?? lc.keepMemory ?? body.autoPauseMemory;

  const net = body.network ?? {};
  return {
    template: body.templateID,
    timeout: body.timeout,
    onTimeout: onTimeout ?? 'kill',
    autoResume: autoResume ?? false,
    ...(pauseMemory === false ? { pauseMemory: false } : {}),
    metadata: body.metadata ?? {},
    envVars: body.envVars ?? body.env_vars ?? {},
    // E2B secures every sandbox; the SDK (2.x) no longer sends the flag. Only an explicit false opts out.
    secure: body.secure ?? true,
    allowInternetAccess: body.allow_internet_access ?? body.allowInternetAccess,
    network: {
      allowOut: net.allowOut ?? net.allow_out ?? [],
      denyOut: net.denyOut ?? net.deny_out ?? [],
      allowPublicTraffic: net.allowPublicTraffic ?? net.allow_public_traffic ?? true,
      ...(net.maskRequestHost !== undefined ? { maskRequestHost: net.maskRequestHost } : {}),
      ...(net.rules !== undefined ? { rules: net.rules } : {}),
      ...(net.egressProxy !== undefined && net.egressProxy !== null ? { egressProxy: net.egressProxy as EgressTunnel } : {}),
    },
    volumeMounts: volumeMountsOf(body.volumeMounts ?? body.volume_mounts ?? []),
    cpuCount: body.cpuCount,
    memoryMB: body.memoryMB,
    ...(body.runtime ? { runtime: body.runtime } : {}),
    ...(body.nodeSelector && Object.keys(body.nodeSelector).length ? { nodeSelector: body.nodeSelector } : {}),
    ...(body.iam?.tokens && Object.keys(body.iam.tokens).length ? { iam: { tokens: body.iam.tokens } } : {}),
  };
}

function volumeMountsOf(mounts: readonly WireVolumeMount[]): VolumeMount[] {
  const names = new Set<string>();
  return mounts.map((m) => {
    if (names.has(m.name)) throw badRequest(`volume ${m.name} is mounted twice; a sandbox may attach a volume only once`);
    names.add(m.name);
    return { name: m.name, path: m.path, readOnly: (m.readOnly ?? m.read_only) === true };
  });
}

/** `Sandbox`: the answer to create, connect and resume. */
export function toE2bSandbox(s: SandboxRecord, domain: string): WireSandbox {
  return {
    sandboxID: s.sandboxId,
    templateID: s.templateId,
    ...(s.alias ? { alias: s.alias } : {}),
    clientID: s.nodeId,
    envdVersion: s.envdVersion,
    ...(s.envdAccessToken ? { envdAccessToken: s.envdAccessToken } : {}),
    trafficAccessToken: s.trafficAccessToken ?? null,
    domain,
  };
}

/** `ListedSandbox`: a sandbox in a list. */
export function toE2bListed(s: SandboxRecord): WireListedSandbox {
  return {
    sandboxID: s.sandboxId,
    templateID: s.templateId,
    ...(s.alias ? { alias: s.alias } : {}),
    clientID: s.nodeId,
    startedAt: s.startedAt,
    ...(s.endAt ? { endAt: s.endAt } : {}),
    cpuCount: s.cpuCount,
    memoryMB: s.memoryMB,
    diskSizeMB: s.diskSizeMB,
    metadata: s.metadata,
    // As the list's state filter counts them: pausing is paused, resuming is running.
    state: s.state === 'paused' || s.state === 'pausing' ? 'paused' : 'running',
    envdVersion: s.envdVersion,
    volumeMounts: s.volumeMounts,
    ...(s.pauseKind ? { pauseKind: s.pauseKind } : {}),
    ...(s.runtime ? { runtime: s.runtime } : {}),
    timeout: s.timeout,
  };
}

/** `SandboxDetail`: one sandbox, with its access token, network and lifecycle. */
export function toE2bDetail(s: SandboxRecord, domain: string): WireSandboxDetail {
  return {
    ...toE2bListed(s),
    ...(s.envdAccessToken ? { envdAccessToken: s.envdAccessToken } : {}),
    domain,
    allowInternetAccess: s.allowInternetAccess ?? null,
    network: {
      allowOut: s.network.allowOut, denyOut: s.network.denyOut, allowPublicTraffic: s.network.allowPublicTraffic,
      ...(s.network.maskRequestHost !== undefined ? { maskRequestHost: s.network.maskRequestHost } : {}),
      ...(s.network.rules !== undefined ? { rules: s.network.rules as WireSandboxDetail['network']['rules'] } : {}),
      ...(s.network.egressProxy ? { egressProxy: { address: s.network.egressProxy.address, ...(s.network.egressProxy.username !== undefined ? { username: s.network.egressProxy.username } : {}) } } : {}),
    },
    lifecycle: { onTimeout: s.lifecycle.onTimeout, autoResume: s.lifecycle.autoResume },
  };
}

export function toE2bMetric(m: SandboxMetrics): WireSandboxMetric {
  return { timestamp: new Date(m.timestampUnix * 1000).toISOString(), ...m };
}

/** E2B's v1 logs: each entry also as a line of JSON, its time beside it. */
export function toE2bLogs(entries: SandboxLogEntry[]): WireSandboxLogs {
  return { logs: entries.map((e) => ({ timestamp: e.timestamp, line: e2bLogLine(e) })), logEntries: entries };
}

/** E2B's SnapshotInfo: the name when there is one (what Sandbox.create and delete take), else the id. */
export function toE2bSnapshot(s: SnapshotRecord): WireSnapshotInfo {
  return { snapshotID: s.name ?? s.snapshotId, names: s.name ? [s.name] : [] };
}
