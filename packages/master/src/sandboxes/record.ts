import { redactNetwork } from './egress-plan.ts';
import type { PauseKind } from '@svc/contracts/node-agent';
import type { SandboxRecord, NetworkConfig, VolumeMount } from '@svc/contracts/master';
import type { SandboxRoute, OnTimeout, SandboxState, TerminateReason } from '@svc/contracts/master-internal';
import type { Row } from './repo.ts';

export function toRecord(r: Row): SandboxRecord {
  return {
    sandboxId: r.sandbox_id,
    teamId: r.team_id,
    templateId: r.template_id,
    ...(r.alias ? { alias: r.alias } : {}),
    nodeId: r.node_id,
    state: r.state as SandboxState,
    ...(r.state === 'paused' && r.pause_kind ? { pauseKind: r.pause_kind as PauseKind } : {}),
    ...(r.runtime === 'gvisor' || r.runtime === 'microvm' ? { runtime: r.runtime } : {}),
    envdVersion: r.envd_version,
    ...(r.envd_access_token ? { envdAccessToken: r.envd_access_token } : {}),
    ...(r.traffic_access_token ? { trafficAccessToken: r.traffic_access_token } : {}),
    secure: !!r.secure,
    cpuCount: r.cpu_count,
    memoryMB: r.memory_mb,
    diskSizeMB: r.disk_size_mb,
    metadata: JSON.parse(r.metadata),
    // Reads never show an inject secret (docs/egress.md, end of "Audit log").
    network: redactNetwork(JSON.parse(r.network) as NetworkConfig),
    ...(r.allow_internet_access === null ? {} : { allowInternetAccess: !!r.allow_internet_access }),
    lifecycle: { onTimeout: r.on_timeout as OnTimeout, autoResume: !!r.auto_resume },
    timeout: r.timeout_sec,
    ...(r.end_at === null ? {} : { endAt: new Date(Number(r.end_at)).toISOString() }),
    startedAt: new Date(Number(r.started_at)).toISOString(),
    // The row also keeps each mount's volume id (resume re-validates by it); answers show what was asked.
    volumeMounts: (JSON.parse(r.volume_mounts) as VolumeMount[]).map((m) => ({ name: m.name, path: m.path, readOnly: m.readOnly })),
    ...(r.terminate_reason ? { terminateReason: r.terminate_reason as TerminateReason } : {}),
  };
}

export function toRoute(r: Row): SandboxRoute {
  return {
    sandboxId: r.sandbox_id,
    state: r.state as SandboxState,
    ...(r.terminate_reason ? { terminateReason: r.terminate_reason as TerminateReason } : {}),
    nodeId: r.node_id,
    address: r.address,
    envdPort: r.envd_port,
    // Paused without its memory, it is resumed by connect only (E2B refuses auto-resume then).
    autoResume: !!r.auto_resume && r.pause_kind !== 'filesystem',
    ...(r.traffic_access_token ? { trafficAccessToken: r.traffic_access_token } : {}),
    ...(r.envd_access_token ? { envdAccessToken: r.envd_access_token } : {}),
    ...maskOf(r.network),
  };
}

function maskOf(network: string): { maskRequestHost?: string } {
  const mask = (JSON.parse(network) as NetworkConfig).maskRequestHost;
  return mask === undefined ? {} : { maskRequestHost: mask };
}
