import { badRequest } from '@svc/common';
import { checkLayerId } from './artifacts/layer-store.ts';
import { RUNTIME_KINDS, type CreateSandboxOnNode, type EnsureArtifact, type ExecInput, type ExecOnNode, type LayerContents, type LayerRef, type NetworkUpdateOnNode, type PauseOnNode, type ResumeOnNode, type RuntimeKind, type SnapshotSandboxOnNode } from '@svc/contracts/node-agent';
import { checkArtifactId } from './artifacts/artifact-store.ts';
import { parseVolumeMountsOnNode } from '@svc/contracts/volumes';

const SANDBOX_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function checkSandboxId(id: string) {
  if (!SANDBOX_ID.test(id)) throw badRequest(`sandbox id ${JSON.stringify(id)} is not valid (letters, digits, _ -, at most 64)`);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function stringMap(v: unknown, field: string, keyPattern?: RegExp): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw badRequest(`${field} must be an object of strings`);
  for (const [k, val] of Object.entries(v)) {
    if (typeof val !== 'string') throw badRequest(`${field}.${k} must be a string`);
    if (keyPattern && !keyPattern.test(k)) throw badRequest(`${field}: ${JSON.stringify(k)} is not a valid name`);
    if (val.includes('\0')) throw badRequest(`${field}.${k} must not contain NUL`);
  }
  return v as Record<string, string>;
}

function stringList(v: unknown, field: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw badRequest(`${field} must be a list of strings`);
  return v as string[];
}

function int(v: unknown, field: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw badRequest(`${field} must be an integer in [${min}, ${max}] (got ${JSON.stringify(v)})`);
  return v;
}

export function parseEnsureArtifact(body: unknown, artifactId: string): EnsureArtifact {
  checkArtifactId(artifactId);
  if (!isObject(body)) throw badRequest('body must be a JSON object {sha256, sizeBytes, downloadUrl}');
  if (typeof body.sha256 !== 'string' || !/^[0-9a-fA-F]{64}$/.test(body.sha256)) throw badRequest('sha256 must be 64 hex digits');
  if (typeof body.downloadUrl !== 'string' || !body.downloadUrl) throw badRequest('downloadUrl is required');
  const sizeBytes = body.sizeBytes === undefined ? 0 : int(body.sizeBytes, 'sizeBytes', 0, Number.MAX_SAFE_INTEGER);
  if (body.localPath !== undefined && (typeof body.localPath !== 'string' || !body.localPath.startsWith('/'))) throw badRequest('localPath must be an absolute path');
  return { sha256: body.sha256.toLowerCase(), sizeBytes, downloadUrl: body.downloadUrl, ...(body.localPath ? { localPath: body.localPath } : {}) };
}

/** Checks a create request field by field; the message names the first bad field. */
export function parseCreate(body: unknown, defaults: { diskSizeMB: number; timeoutMs: number }): CreateSandboxOnNode {
  if (!isObject(body)) throw badRequest('body must be a JSON object');
  if (typeof body.sandboxId !== 'string') throw badRequest('sandboxId is required');
  checkSandboxId(body.sandboxId);
  if (typeof body.templateId !== 'string' || !body.templateId) throw badRequest('templateId is required');
  if (!isObject(body.artifact)) throw badRequest('artifact is required: {artifactId, sha256, sizeBytes, downloadUrl}');
  const a = body.artifact;
  if (typeof a.artifactId !== 'string') throw badRequest('artifact.artifactId is required');
  const artifact = { artifactId: a.artifactId, ...parseEnsureArtifact(a, a.artifactId) };
  const network = body.network === undefined || body.network === null ? {} : body.network;
  if (!isObject(network)) throw badRequest('network must be an object {allowOut, denyOut}');
  if (body.allowInternetAccess !== undefined && typeof body.allowInternetAccess !== 'boolean') throw badRequest('allowInternetAccess must be a boolean');
  if (body.envdAccessToken !== undefined && (typeof body.envdAccessToken !== 'string' || !body.envdAccessToken)) throw badRequest('envdAccessToken must be a non-empty string');
  return {
    sandboxId: body.sandboxId,
    templateId: body.templateId,
    artifact,
    cpuCount: int(body.cpuCount, 'cpuCount', 1, 64),
    memoryMB: int(body.memoryMB, 'memoryMB', 64, 1024 * 1024),
    diskSizeMB: body.diskSizeMB === undefined ? defaults.diskSizeMB : int(body.diskSizeMB, 'diskSizeMB', 1, 16 * 1024 * 1024),
    envVars: stringMap(body.envVars, 'envVars', ENV_NAME),
    envdAccessToken: body.envdAccessToken as string | undefined,
    allowInternetAccess: body.allowInternetAccess !== false,
    network: { allowOut: stringList(network.allowOut, 'network.allowOut'), denyOut: stringList(network.denyOut, 'network.denyOut'), steer: steerList(network.steer) },
    metadata: stringMap(body.metadata, 'metadata'),
    timeoutMs: body.timeoutMs === undefined ? defaults.timeoutMs : int(body.timeoutMs, 'timeoutMs', 1, 3_600_000),
    ...(body.layer === undefined ? {} : { layer: parseLayerRef(body.layer) }),
    ...(body.defaultUser === undefined ? {} : { defaultUser: userName(body.defaultUser, 'defaultUser') }),
    ...(body.defaultWorkdir === undefined ? {} : { defaultWorkdir: absolutePath(body.defaultWorkdir, 'defaultWorkdir') }),
    ...(body.volumes === undefined ? {} : { volumes: parseVolumeMountsOnNode(body.volumes) }),
    ...(body.runtime === undefined ? {} : { runtime: runtimeKind(body.runtime) }),
  };
}

function runtimeKind(v: unknown): RuntimeKind {
  if (!RUNTIME_KINDS.includes(v as RuntimeKind)) throw badRequest(`runtime must be one of ${RUNTIME_KINDS.join(', ')}`);
  return v as RuntimeKind;
}

function userName(v: unknown, field: string): string {
  if (typeof v !== 'string' || !USER_NAME.test(v)) throw badRequest(`${field} must be a user name (letters, digits, _ . -)`);
  return v;
}

function absolutePath(v: unknown, field: string): string {
  if (typeof v !== 'string' || !v.startsWith('/') || v.includes('\0') || v.length > 4096) throw badRequest(`${field} must be an absolute path`);
  return v;
}

function layerContents(v: unknown): LayerContents {
  if (v !== 'filesystem' && v !== 'memory') throw badRequest('layer.contents must be filesystem or memory');
  return v;
}

function parseLayerRef(v: unknown): LayerRef {
  if (!isObject(v)) throw badRequest('layer must be an object {layerId, sha256, sizeBytes, downloadUrl?, contents?}');
  const layerId = checkLayerId(v.layerId);
  if (typeof v.sha256 !== 'string' || !/^[0-9a-fA-F]{64}$/.test(v.sha256)) throw badRequest('layer.sha256 must be 64 hex digits');
  if (v.downloadUrl !== undefined && (typeof v.downloadUrl !== 'string' || !v.downloadUrl)) throw badRequest('layer.downloadUrl must be a non-empty string');
  return {
    layerId, sha256: v.sha256.toLowerCase(), sizeBytes: int(v.sizeBytes, 'layer.sizeBytes', 0, Number.MAX_SAFE_INTEGER),
    ...(v.downloadUrl === undefined ? {} : { downloadUrl: v.downloadUrl as string }),
    ...(v.contents === undefined ? {} : { contents: layerContents(v.contents) }),
  };
}

/** POST /v1/sandboxes/:id/pause: an empty body, or {memory}. */
export function parsePause(body: unknown): PauseOnNode {
  if (body === undefined || body === null || body === '') return {};
  if (!isObject(body)) throw badRequest('body must be a JSON object {memory}');
  if (body.memory !== undefined && typeof body.memory !== 'boolean') throw badRequest('memory must be a boolean');
  return body.memory === undefined ? {} : { memory: body.memory };
}

/** POST /v1/sandboxes/:id/resume: an empty body, or {memory, envVars, envdAccessToken}. */
export function parseResume(body: unknown): ResumeOnNode {
  if (body === undefined || body === null || body === '') return {};
  if (!isObject(body)) throw badRequest('body must be a JSON object {memory, envVars, envdAccessToken}');
  if (body.memory !== undefined && typeof body.memory !== 'boolean') throw badRequest('memory must be a boolean');
  if (body.envdAccessToken !== undefined && (typeof body.envdAccessToken !== 'string' || !body.envdAccessToken)) throw badRequest('envdAccessToken must be a non-empty string');
  return {
    ...(body.memory === undefined ? {} : { memory: body.memory }),
    ...(body.envVars === undefined ? {} : { envVars: stringMap(body.envVars, 'envVars', ENV_NAME) }),
    ...(body.envdAccessToken === undefined ? {} : { envdAccessToken: body.envdAccessToken as string }),
    ...(body.volumes === undefined ? {} : { volumes: parseVolumeMountsOnNode(body.volumes) }),
  };
}

/** POST /v1/sandboxes/:id/snapshot: the id the captured layer gets, and whether to capture memory where the runtime can. */
export function parseSnapshot(body: unknown): SnapshotSandboxOnNode {
  if (!isObject(body)) throw badRequest('body must be a JSON object {layerId, memory}');
  if (body.memory !== undefined && typeof body.memory !== 'boolean') throw badRequest('memory must be a boolean');
  return { layerId: checkLayerId(body.layerId), ...(body.memory === undefined ? {} : { memory: body.memory }) };
}

/** PUT /v1/sandboxes/:id/network: the whole egress policy, as create takes it. */
export function parseNetworkUpdate(body: unknown): NetworkUpdateOnNode {
  if (!isObject(body)) throw badRequest('body must be an object {allowInternetAccess, network: {allowOut, denyOut}}');
  const network = body.network === undefined || body.network === null ? {} : body.network;
  if (!isObject(network)) throw badRequest('network must be an object {allowOut, denyOut}');
  if (typeof body.allowInternetAccess !== 'boolean') throw badRequest('allowInternetAccess must be a boolean');
  return {
    allowInternetAccess: body.allowInternetAccess,
    network: { allowOut: stringList(network.allowOut, 'network.allowOut'), denyOut: stringList(network.denyOut, 'network.denyOut'), steer: steerList(network.steer) },
  };
}

const USER_NAME = /^[a-z_][a-z0-9_.-]{0,31}$/i;

/** POST /v1/sandboxes/:id/exec. */
export function parseExec(body: unknown): Required<Omit<ExecOnNode, 'user' | 'stdin' | 'cwd'>> & Pick<ExecOnNode, 'stdin' | 'cwd'> & { user: string } {
  if (!isObject(body)) throw badRequest('body must be a JSON object {command, user, cwd, envVars, timeoutMs}');
  if (typeof body.command !== 'string' || !body.command.trim()) throw badRequest('command must be a non-empty string');
  if (body.user !== undefined && (typeof body.user !== 'string' || !USER_NAME.test(body.user))) throw badRequest('user must be a user name (letters, digits, _ . -)');
  if (body.cwd !== undefined && (typeof body.cwd !== 'string' || !body.cwd.startsWith('/') || body.cwd.includes('\0'))) throw badRequest('cwd must be an absolute path');
  return {
    command: body.command,
    user: (body.user as string | undefined) ?? 'root',
    ...(body.cwd === undefined ? {} : { cwd: body.cwd as string }),
    envVars: stringMap(body.envVars, 'envVars', ENV_NAME),
    timeoutMs: body.timeoutMs === undefined ? 600_000 : int(body.timeoutMs, 'timeoutMs', 1, 3_600_000),
    ...(body.stdin === undefined ? {} : { stdin: parseExecInput(body.stdin) }),
  };
}

function parseExecInput(v: unknown): ExecInput {
  if (!isObject(v)) throw badRequest('stdin must be an object {url, sha256, sizeBytes}');
  if (typeof v.url !== 'string' || !(v.url.startsWith('/') || /^https?:\/\//.test(v.url))) throw badRequest('stdin.url must be a path on the master or an http(s) URL');
  if (typeof v.sha256 !== 'string' || !/^[0-9a-f]{64}$/i.test(v.sha256)) throw badRequest('stdin.sha256 must be 64 hex digits');
  return { url: v.url, sha256: v.sha256.toLowerCase(), sizeBytes: int(v.sizeBytes, 'stdin.sizeBytes', 0, Number.MAX_SAFE_INTEGER) };
}

/** The shape only; normalizePolicy checks each entry. */
function steerList(v: unknown): Array<{ port: number; scheme: 'http' | 'https' }> {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw badRequest('network.steer must be a list of {port, scheme}');
  return v as Array<{ port: number; scheme: 'http' | 'https' }>;
}
