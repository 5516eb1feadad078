/**
 * Translation between E2B's wire shapes (spec/openapi.yml of e2b-dev/infra) and the master's
 * normalised records. Input validation lives here: wrong types are a 400 naming the field.
 */
import { badRequest } from '@svc/common';
import type { CreateSandboxInput, SandboxRecord, VolumeMount } from '@svc/master/api';
import type { SandboxMetrics } from '@svc/node-agent/api';

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function optBool(body: Obj, ...names: string[]): boolean | undefined {
  for (const n of names) {
    const v = body[n];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'boolean') throw badRequest(`${n} must be a boolean`);
    return v;
  }
  return undefined;
}

function optInt(body: Obj, name: string, min?: number): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw badRequest(`${name} must be an integer`);
  if (min !== undefined && v < min) throw badRequest(`${name} must be at least ${min}`);
  return v;
}

function stringMap(v: unknown, name: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObj(v)) throw badRequest(`${name} must be an object of string values`);
  for (const [k, x] of Object.entries(v)) if (typeof x !== 'string') throw badRequest(`${name}.${k} must be a string`);
  return v as Record<string, string>;
}

function stringList(v: unknown, name: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw badRequest(`${name} must be a list of strings`);
  return v;
}

export function parseNewSandbox(body: unknown): CreateSandboxInput {
  if (!isObj(body)) throw badRequest('request body must be a JSON object');
  const template = body.templateID ?? body.templateId ?? body.template;
  if (typeof template !== 'string' || !template) throw badRequest('templateID is required (a template id or alias)');
  const timeout = optInt(body, 'timeout', -1);

  const lifecycle = body.lifecycle;
  if (lifecycle !== undefined && lifecycle !== null && !isObj(lifecycle)) throw badRequest('lifecycle must be an object');
  const lc = (lifecycle ?? {}) as Obj;
  let onTimeout = lc.on_timeout ?? lc.onTimeout;
  if (onTimeout !== undefined && onTimeout !== 'kill' && onTimeout !== 'pause') throw badRequest('lifecycle.on_timeout must be kill or pause');
  const autoPause = optBool(body, 'autoPause');
  if (onTimeout === undefined && autoPause !== undefined) onTimeout = autoPause ? 'pause' : 'kill';
  let autoResume = optBool(lc, 'auto_resume', 'autoResume');
  const ar = body.autoResume;
  if (autoResume === undefined && ar !== undefined && ar !== null) {
    if (typeof ar === 'boolean') autoResume = ar;
    else if (isObj(ar) && typeof ar.enabled === 'boolean') autoResume = ar.enabled;
    else throw badRequest('autoResume must be {"enabled": boolean}');
  }
  if (autoResume && onTimeout !== 'pause') throw badRequest('auto_resume needs on_timeout=pause');

  const network = body.network;
  if (network !== undefined && network !== null && !isObj(network)) throw badRequest('network must be an object');
  const net = (network ?? {}) as Obj;
  const allowPublicTraffic = optBool(net, 'allowPublicTraffic', 'allow_public_traffic');

  const mountsRaw = body.volumeMounts ?? body.volume_mounts;
  const volumeMounts: VolumeMount[] = [];
  if (mountsRaw !== undefined && mountsRaw !== null) {
    if (!Array.isArray(mountsRaw)) throw badRequest('volumeMounts must be a list of {name, path, readOnly?}');
    for (const [i, m] of mountsRaw.entries()) {
      if (!isObj(m) || typeof m.name !== 'string' || typeof m.path !== 'string') throw badRequest(`volumeMounts[${i}] must have string name and path`);
      if (!m.path.startsWith('/')) throw badRequest(`volumeMounts[${i}].path must be absolute`);
      const ro = m.readOnly ?? m.read_only;
      if (ro !== undefined && typeof ro !== 'boolean') throw badRequest(`volumeMounts[${i}].readOnly must be a boolean`);
      volumeMounts.push({ name: m.name, path: m.path, readOnly: ro === true });
    }
    const names = new Set<string>();
    for (const m of volumeMounts) {
      if (names.has(m.name)) throw badRequest(`volume ${m.name} is mounted twice; a sandbox may attach a volume only once`);
      names.add(m.name);
    }
  }

  return {
    template,
    timeout,
    onTimeout: (onTimeout as 'kill' | 'pause' | undefined) ?? 'kill',
    autoResume: autoResume ?? false,
    metadata: stringMap(body.metadata, 'metadata'),
    envVars: stringMap(body.envVars ?? body.env_vars, 'envVars'),
    // E2B secures every sandbox; the SDK (2.x) no longer sends the flag. Only an explicit false opts out.
    secure: optBool(body, 'secure') ?? true,
    allowInternetAccess: optBool(body, 'allow_internet_access', 'allowInternetAccess'),
    network: {
      allowOut: stringList(net.allowOut ?? net.allow_out, 'network.allowOut'),
      denyOut: stringList(net.denyOut ?? net.deny_out, 'network.denyOut'),
      allowPublicTraffic: allowPublicTraffic ?? true,
      ...(net.rules !== undefined ? { rules: net.rules } : {}),
    },
    volumeMounts,
    cpuCount: optInt(body, 'cpuCount', 1),
    memoryMB: optInt(body, 'memoryMB', 64),
  };
}

/** `Sandbox`: the answer to create, connect and resume. */
export function toE2bSandbox(s: SandboxRecord, domain: string) {
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

/** `ListedSandbox` and `SandboxDetail` (detail adds the access token, network and lifecycle). */
export function toE2bListed(s: SandboxRecord, domain: string, detail = false) {
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
    state: s.state,
    envdVersion: s.envdVersion,
    volumeMounts: s.volumeMounts,
    ...(s.pauseKind ? { pauseKind: s.pauseKind } : {}),
    timeout: s.timeout,
    ...(detail ? {
      ...(s.envdAccessToken ? { envdAccessToken: s.envdAccessToken } : {}),
      domain,
      allowInternetAccess: s.allowInternetAccess ?? null,
      network: {
        allowOut: s.network.allowOut, denyOut: s.network.denyOut, allowPublicTraffic: s.network.allowPublicTraffic,
        ...(s.network.rules !== undefined ? { rules: s.network.rules } : {}),
      },
      lifecycle: { onTimeout: s.lifecycle.onTimeout, autoResume: s.lifecycle.autoResume },
    } : {}),
  };
}

export function toE2bMetric(m: SandboxMetrics) {
  return { timestamp: new Date(m.timestampUnix * 1000).toISOString(), ...m };
}
