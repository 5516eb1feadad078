/**
 * What the node agent does with a request its route's schema took (NODE_AGENT_ROUTES,
 * contracts/node-agent-schemas.ts, checked before the handler runs): what a schema cannot say.
 * It fills in what a sender may leave out (absent, null, or an empty query parameter: the
 * agent's configured defaults, `root`, empty maps and lists), writes sha256s in lower case,
 * checks the volume mounts together (parseVolumeMountsOnNode), and checks the sandbox id of a
 * path, which has no schema.
 */
import { badRequest } from '@svc/common';
import { NODE_AGENT_ROUTES as R, type ArtifactRef, type CreateSandboxOnNode, type EnsureArtifact, type LayerRef, type NetworkUpdateOnNode, type PauseOnNode, type ResumeOnNode, type SnapshotSandboxOnNode } from '@svc/contracts/node-agent';
import { SANDBOX_ID_PATTERN } from '@svc/contracts/node-agent-schemas';
import type { BodyOf, QueryOf } from '@svc/contracts/route-table';
import type { SandboxLogSelection } from '@svc/contracts/sandbox-logs';
import { parseVolumeMountsOnNode } from '@svc/contracts/volumes';
import { checkArtifactId } from './artifacts/artifact-store.ts';
import type { ExecRequest } from './sandboxes/exec.ts';

type Body<K extends keyof typeof R> = BodyOf<(typeof R)[K]>;

const SANDBOX_ID = new RegExp(SANDBOX_ID_PATTERN);

/** A sandbox id from a path (a body's is checked by its schema, to the same pattern). */
export function checkSandboxId(id: string) {
  if (!SANDBOX_ID.test(id)) throw badRequest(`sandbox id ${JSON.stringify(id)} is not valid (letters, digits, _ -, at most 64)`);
}

/** POST /v1/artifacts/:id: the id of the path checked, the size 0 when absent. */
export function parseEnsureArtifact(body: Body<'ensureArtifact'>, artifactId: string): EnsureArtifact {
  checkArtifactId(artifactId);
  return ensureArtifact(body);
}

function ensureArtifact(a: Body<'ensureArtifact'>): EnsureArtifact {
  return { sha256: a.sha256.toLowerCase(), sizeBytes: a.sizeBytes ?? 0, downloadUrl: a.downloadUrl, ...(a.localPath ? { localPath: a.localPath } : {}) };
}

/** POST /v1/sandboxes: the node's defaults filled in. */
export function parseCreate(body: Body<'createSandbox'>, defaults: { diskSizeMB: number; timeoutMs: number }): CreateSandboxOnNode {
  const artifact: ArtifactRef = { artifactId: body.artifact.artifactId, ...ensureArtifact(body.artifact) };
  return {
    sandboxId: body.sandboxId,
    templateId: body.templateId,
    artifact,
    cpuCount: body.cpuCount,
    memoryMB: body.memoryMB,
    diskSizeMB: body.diskSizeMB ?? defaults.diskSizeMB,
    envVars: body.envVars ?? {},
    envdAccessToken: body.envdAccessToken,
    allowInternetAccess: body.allowInternetAccess !== false,
    network: network(body.network),
    metadata: body.metadata ?? {},
    timeoutMs: body.timeoutMs ?? defaults.timeoutMs,
    ...(body.layer === undefined ? {} : { layer: layerRef(body.layer) }),
    ...(body.defaultUser === undefined ? {} : { defaultUser: body.defaultUser }),
    ...(body.defaultWorkdir === undefined ? {} : { defaultWorkdir: body.defaultWorkdir }),
    ...(body.volumes === undefined ? {} : { volumes: parseVolumeMountsOnNode(body.volumes) }),
    ...(body.runtime === undefined ? {} : { runtime: body.runtime }),
  };
}

function layerRef(v: NonNullable<Body<'createSandbox'>['layer']>): LayerRef {
  return {
    layerId: v.layerId, sha256: v.sha256.toLowerCase(), sizeBytes: v.sizeBytes,
    ...(v.downloadUrl === undefined ? {} : { downloadUrl: v.downloadUrl }),
    ...(v.contents === undefined ? {} : { contents: v.contents }),
  };
}

/** The egress lists, empty when absent or null; the egress policy checks each entry. */
function network(n: Body<'updateNetwork'>['network']): CreateSandboxOnNode['network'] {
  return { allowOut: n?.allowOut ?? [], denyOut: n?.denyOut ?? [], steer: n?.steer ?? [], ...(n?.tunnel ? { tunnel: true } : {}) };
}

/** POST /v1/sandboxes/:id/pause: no body, or {memory}. */
export function parsePause(body: Body<'pauseSandbox'> | undefined): PauseOnNode {
  return !body || body.memory === undefined ? {} : { memory: body.memory };
}

/** POST /v1/sandboxes/:id/resume: no body, or {memory, envVars, envdAccessToken, volumes}. */
export function parseResume(body: Body<'resumeSandbox'> | undefined): ResumeOnNode {
  if (!body) return {};
  return {
    ...(body.memory === undefined ? {} : { memory: body.memory }),
    ...(body.envVars === undefined ? {} : { envVars: body.envVars ?? {} }),
    ...(body.envdAccessToken === undefined ? {} : { envdAccessToken: body.envdAccessToken }),
    ...(body.volumes === undefined ? {} : { volumes: parseVolumeMountsOnNode(body.volumes) }),
  };
}

/** POST /v1/sandboxes/:id/snapshot: the id the captured layer gets, and whether to capture memory where the runtime can. */
export function parseSnapshot(body: Body<'snapshotSandbox'>): SnapshotSandboxOnNode {
  return { layerId: body.layerId, ...(body.memory === undefined ? {} : { memory: body.memory }) };
}

/** PUT /v1/sandboxes/:id/network: the whole egress policy, as create takes it. */
export function parseNetworkUpdate(body: Body<'updateNetwork'>): NetworkUpdateOnNode {
  return { allowInternetAccess: body.allowInternetAccess, network: network(body.network) };
}

/** POST /v1/sandboxes/:id/exec: as root, for at most 10 minutes, unless it says otherwise. */
export function parseExec(body: Body<'exec'>): ExecRequest {
  return {
    command: body.command,
    user: body.user ?? 'root',
    ...(body.cwd === undefined ? {} : { cwd: body.cwd }),
    envVars: body.envVars ?? {},
    timeoutMs: body.timeoutMs ?? 600_000,
    ...(body.stdin === undefined ? {} : { stdin: { url: body.stdin.url, sha256: body.stdin.sha256.toLowerCase(), sizeBytes: body.stdin.sizeBytes } }),
  };
}

/** GET /v1/sandboxes/:id/logs: an empty parameter (`?level=`) as an absent one. */
export function parseLogsQuery(q: QueryOf<typeof R.sandboxLogs>): SandboxLogSelection {
  return {
    limit: q.limit === '' ? R.sandboxLogs.query.properties.limit.default : q.limit,
    direction: q.direction === '' ? R.sandboxLogs.query.properties.direction.default : q.direction,
    ...(q.cursor === undefined || q.cursor === '' ? {} : { cursor: q.cursor }),
    ...(q.level === undefined || q.level === '' ? {} : { level: q.level }),
    ...(q.search === undefined || q.search === '' ? {} : { search: q.search }),
  };
}
