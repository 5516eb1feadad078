/**
 * Persistent volumes (docs/volumes.md): the records, the plugin protocol's messages
 * (docs/volume-plugins.md) and the wire between gateway, master and node agent.
 *
 * Master (the gateway maps E2B's /volumes and /volumecontent onto these; MASTER_VOLUME_ROUTES):
 *   POST   /svc/volume                         → 201 VolumeAndToken   (body NewVolume; 400 code 130400 unknown driver)
 *   GET    /svc/volume                         → VolumeInfo[]
 *   GET    /svc/volume/:ref                    → VolumeAndToken | 404 (ref: id, or the team's name)
 *   DELETE /svc/volume/:ref                    → 204 | 404 | 409 code 130409 (mounted)
 *   *      /svc/volumecontent/:ref/{dir,file,path}  → the volume content API (VOLUME_CONTENT_PATH: every
 *                                                 method, passed through), authorized by the team header or
 *                                                 `Authorization: Bearer <token>`
 *   GET    /v1/volumes/refcounts               → VolumeRefcount[]     (operator: the master's counts, tests and `svc volume list`)
 * Node agent:
 *   GET    /v1/volumes/attachments             → NodeVolumeAttachment[]  (node-local counts)
 *   *      /v1/volume-content/:volumeId/{dir,file,path}  → the content API on the volume's host path;
 *                                                 header VOLUME_HEADER carries the VolumeOnNode (base64url JSON)
 */
import { badRequest } from '@svc/common/errors';
import type { VolumePluginConfig } from '@svc/common';
import { answers, type RouteTable } from './route-table.ts';

export const VOLUME_NAME_PATTERN = /^[a-zA-Z0-9_-]+$/;

export const VOLUME_LIMITS = {
  nameChars: 128,
  privateDataBytes: 1024,
  tokenChars: 1024,
  /**
   * The shortest token a plugin may answer (an empty one aside: no token): the token is the
   * bearer credential of the volume's content API, and 22 base64 characters hold 128 bits.
   */
  minTokenChars: 22,
  /** Attach metadata: entries, and bytes of its JSON. */
  metadataEntries: 64,
  metadataBytes: 8 * 1024,
  hostPathBytes: 4096,
  driverChars: 64,
} as const;

/** The node agent's default `volume_plugin_base_dir` (docs/volume-plugins.md "Configuration"). */
export const DEFAULT_VOLUME_BASE_DIR = '/data/svc-shared/volume';
/** A host directory bind or remount that takes longer fails instead of blocking (docs/volumes.md "Limits and figures"). */
export const HOST_BIND_TIMEOUT_MS = 3_000;
/** Default time a plugin hook may take before the call fails (`volume_plugins[].timeout_ms`). */
export const DEFAULT_HOOK_TIMEOUT_MS = 30_000;

/** Error codes of the volume routes (docs/volumes.md "The REST routes"): unknown driver, volume still mounted. */
export const VOLUME_CODES = { unknownDriver: 130400, inUse: 130409 } as const;

/** Diagnostics of docs/volume-plugins.md "Diagnostics": the node agent lacks the entry / the master lacks it or the names differ. */
export const NO_PLUGIN_FOR_DRIVER = 'no plugin registered for driver';
export const UNKNOWN_DRIVER = 'unknown driver';

export function checkVolumeName(name: unknown, field = 'name'): string {
  if (typeof name !== 'string' || name === '') throw badRequest(`${field} must be a non-empty string`);
  if (name.length > VOLUME_LIMITS.nameChars) throw badRequest(`${field} has ${name.length} characters; at most ${VOLUME_LIMITS.nameChars}`);
  if (!VOLUME_NAME_PATTERN.test(name)) throw badRequest(`${field} must match ^[a-zA-Z0-9_-]+$`);
  // A binary plugin is told the name as `--name NAME`: one that begins with '-' reads as a flag to
  // a plugin that parses its command line loosely (a getopt that takes `-h`).
  if (name.startsWith('-')) throw badRequest(`${field} must not begin with '-' (a volume plugin would read it as a flag)`);
  return name;
}

// ---- configuration ---------------------------------------------------------------------------

export type { VolumePluginConfig } from '@svc/common';
export type VolumePluginType = VolumePluginConfig['type'];

// ---- the plugin protocol (hook messages; binary flags and gRPC fields in docs/volume-plugins.md) ----

export interface CreateHookInput { volumeId: string; name: string }
export interface CreateHookOutput { token: string; privateData: string }
export interface DestroyHookInput { volumeId: string }
export interface AttachHookInput {
  sandboxId: string;
  namespace: string;
  volumeId: string;
  /** Count on this node before the attach. */
  refCount: number;
  volumeBaseDir: string;
  privateData: string;
}
export interface AttachHookOutput { hostPath: string; metadata: Record<string, string> }
export interface DetachHookInput {
  sandboxId: string;
  namespace: string;
  volumeId: string;
  /** Count on this node after the detach. */
  refCount: number;
  metadata: Record<string, string>;
}

/** The controller side, called by the master. */
export interface VolumeControllerHooks {
  create(input: CreateHookInput): Promise<CreateHookOutput>;
  destroy(input: DestroyHookInput): Promise<void>;
}
/** The node side, called by the node agent. */
export interface VolumeNodeHooks {
  attach(input: AttachHookInput): Promise<AttachHookOutput>;
  detach(input: DetachHookInput): Promise<void>;
}
export interface VolumePlugin extends VolumeControllerHooks, VolumeNodeHooks {
  readonly name: string;
  readonly type: VolumePluginType;
  close(): Promise<void>;
}

/** The containerd-style namespace the hooks are told (docs/volume-plugins.md "Binary plugins": `--namespace`, the container runtime namespace). */
export const VOLUME_NAMESPACE = 'svc';

// ---- records and the public wire ------------------------------------------------------------------

/** E2B's Volume (list entries). */
export interface VolumeInfo { volumeID: string; name: string }
/** E2B's VolumeAndToken (create and get); token is '' when the plugin returned none. */
export interface VolumeAndToken extends VolumeInfo { token: string }
export interface NewVolume { name?: string; driver?: string }

export interface VolumeRefcount { volumeID: string; refcount: number }

/** No body, or null, is a volume with no name given (its id) on the default driver; the name's rules are the master's check. */
const NewVolumeBody = {
  type: ['object', 'null'],
  properties: { name: { type: 'string' }, driver: { type: 'string' } },
} as const;

/**
 * The master's volume routes (route-table.ts). Wildcards, not `:ref`: the router caps a
 * parameter at 100 characters, and a name may have 128 (masterVolumePath fills them).
 */
export const MASTER_VOLUME_ROUTES = {
  list: { method: 'GET', path: '/svc/volume', answer: answers<VolumeInfo[]>() },
  create: { method: 'POST', path: '/svc/volume', body: NewVolumeBody, answer: answers<VolumeAndToken>() },
  get: { method: 'GET', path: '/svc/volume/*', answer: answers<VolumeAndToken>() },
  destroy: { method: 'DELETE', path: '/svc/volume/*', answer: answers<void>() },
  refcounts: { method: 'GET', path: '/v1/volumes/refcounts', answer: answers<VolumeRefcount[]>() },
} as const satisfies RouteTable;

/** The path of one volume (MASTER_VOLUME_ROUTES.get and .destroy): the ref URL-encoded in the wildcard. */
export function masterVolumePath(ref: string): string {
  return `${MASTER_VOLUME_ROUTES.get.path.slice(0, -1)}${encodeURIComponent(ref)}`;
}

/**
 * The master's volume content API: `${VOLUME_CONTENT_PATH}/<ref>/{dir,file,path}`, every method,
 * its bodies passed through to a node agent untouched (VOLUME_CONTENT_KINDS).
 */
export const VOLUME_CONTENT_PATH = '/svc/volumecontent';

// ---- master ↔ node agent ---------------------------------------------------------------------------

/** A volume as the master hands it to a node agent for Attach (create, resume, content calls). */
export interface VolumeOnNode {
  volumeId: string;
  driver: string;
  privateData: string;
}

/** A mount in a create or resume: the volume, where it appears, and whether the sandbox may write. */
export interface VolumeMountOnNode extends VolumeOnNode {
  path: string;
  readOnly: boolean;
}

/** A node-local count flip (docs/volumes.md "Lifecycle and counts"): +1 on 0→1, -1 on 1→0. */
export interface VolumeRefFlip { volumeId: string; delta: 1 | -1 }

/** What create, destroy, pause and resume answers carry besides the sandbox (docs/volumes.md "Lifecycle and counts"). */
export interface ExtInfo { volumeRefFlips?: VolumeRefFlip[] }

/** A node's holders of one volume (GET /v1/volumes/attachments). */
export interface NodeVolumeAttachment {
  volumeId: string;
  driver: string;
  hostPath: string;
  /** Node-local count: sandboxes (and content calls in flight) holding it. */
  refCount: number;
  holders: string[];
}

/** The header that carries a VolumeOnNode to the node agent's content routes (base64url JSON). */
export const VOLUME_HEADER = 'x-svc-volume';

export function encodeVolumeHeader(v: VolumeOnNode): string {
  return Buffer.from(JSON.stringify(v)).toString('base64url');
}

export function decodeVolumeHeader(value: unknown): VolumeOnNode {
  if (typeof value !== 'string' || value === '' || value.length > 8192) throw badRequest(`${VOLUME_HEADER} is missing`);
  let v: Partial<VolumeOnNode>;
  try {
    v = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as Partial<VolumeOnNode>;
  } catch {
    throw badRequest(`${VOLUME_HEADER} is not base64url JSON`);
  }
  if (typeof v?.volumeId !== 'string' || typeof v.driver !== 'string' || typeof v.privateData !== 'string') {
    throw badRequest(`${VOLUME_HEADER} must hold {volumeId, driver, privateData}`);
  }
  return { volumeId: v.volumeId, driver: v.driver, privateData: v.privateData };
}

/** Node features the master reads from NodeInfo: without 'volumes' a mount is a no-op (docs/cluster.md "Upgrade order"). */
export const NODE_FEATURE_VOLUMES = 'volumes';

// ---- the volume content API (E2B's /volumecontent, served for the official SDK's Volume) -----------

/** The three paths under /volumecontent/{volumeID}/ (E2B's volume content API). */
export const VOLUME_CONTENT_KINDS = ['dir', 'file', 'path'] as const;
export type VolumeContentKind = typeof VOLUME_CONTENT_KINDS[number];

/** E2B's VolumeEntryStat. */
export interface VolumeEntryStat {
  name: string;
  /** Absolute within the volume: '/' is its root. */
  path: string;
  type: 'unknown' | 'file' | 'directory' | 'symlink';
  size: number;
  mode: number;
  uid: number;
  gid: number;
  atime: string;
  mtime: string;
  ctime: string;
  target?: string;
}

// ---- checks shared by the master (create input) and the node agent (its wire) ---------------------

/** Paths inside a sandbox a volume may not cover: the root, the kernel's file systems, svc's runtime. */
const RESERVED_MOUNT_PATHS = ['/proc', '/sys', '/dev', '/.svc'];

/** Why a mount path cannot be used, or undefined. */
export function mountPathProblem(path: string): string | undefined {
  if (!path.startsWith('/') || path.includes('\0') || Buffer.byteLength(path) > VOLUME_LIMITS.hostPathBytes) return 'must be an absolute path';
  const parts = path.split('/').filter(Boolean);
  if (parts.some((p) => p === '.' || p === '..')) return 'must not have . or .. parts';
  if (parts.length === 0) return 'must not be / (a volume is mounted on a directory inside the sandbox)';
  const clean = `/${parts.join('/')}`;
  const reserved = RESERVED_MOUNT_PATHS.find((r) => clean === r || clean.startsWith(`${r}/`));
  if (reserved) return `must not be ${reserved} or inside it (the sandbox's own)`;
  return undefined;
}

/** A mount path as it is used: single slashes, no trailing one. */
export function cleanMountPath(path: string): string {
  return `/${path.split('/').filter(Boolean).join('/')}`;
}

const VOLUME_ID = /^[a-zA-Z0-9_-]{1,128}$/;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The node agent's check of the volumes of a create or resume; the message names the bad field. */
export function parseVolumeMountsOnNode(v: unknown, field = 'volumes'): VolumeMountOnNode[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw badRequest(`${field} must be a list of {volumeId, driver, privateData, path, readOnly}`);
  if (v.length > 32) throw badRequest(`${field} has ${v.length} entries; at most 32`);
  const ids = new Set<string>();
  const paths = new Set<string>();
  return v.map((m, i) => {
    const at = `${field}[${i}]`;
    if (!isObject(m)) throw badRequest(`${at} must be an object {volumeId, driver, privateData, path, readOnly}`);
    if (typeof m.volumeId !== 'string' || !VOLUME_ID.test(m.volumeId)) throw badRequest(`${at}.volumeId must match ^[a-zA-Z0-9_-]{1,128}$`);
    if (typeof m.driver !== 'string' || m.driver === '' || m.driver.length > VOLUME_LIMITS.driverChars) throw badRequest(`${at}.driver must be a plugin name`);
    const privateData = m.privateData ?? '';
    if (typeof privateData !== 'string' || Buffer.byteLength(privateData) > VOLUME_LIMITS.privateDataBytes) throw badRequest(`${at}.privateData must be a string of at most ${VOLUME_LIMITS.privateDataBytes} bytes`);
    if (typeof m.path !== 'string') throw badRequest(`${at}.path must be a string`);
    const problem = mountPathProblem(m.path);
    if (problem) throw badRequest(`${at}.path ${problem}`);
    if (m.readOnly !== undefined && typeof m.readOnly !== 'boolean') throw badRequest(`${at}.readOnly must be a boolean`);
    const path = cleanMountPath(m.path);
    if (ids.has(m.volumeId)) throw badRequest(`volume ${m.volumeId} is mounted twice; a sandbox may attach a volume only once`);
    if (paths.has(path)) throw badRequest(`two volumes are mounted at ${path}`);
    ids.add(m.volumeId);
    paths.add(path);
    return { volumeId: m.volumeId, driver: m.driver, privateData, path, readOnly: m.readOnly === true };
  });
}
