import { badRequest } from '@svc/common';
import { DEBIAN_ROOTFS_FLAVORS, type BuildRequest, type BuildSource, type DebianRootfsFlavor } from '@svc/contracts/template-center';
import { isValidArtifactId } from './store/artifact-store.ts';

const MAX_DISK_MB = 1024 * 1024;
/** A fair-share key is a team's id; the bound keeps a client from queueing under a megabyte of name. */
const MAX_QUEUE_CHARS = 128;

function printableUnicode(s: string): boolean {
  if (/[\u0000-\u001f\u007f]/.test(s)) return false;
  try {
    encodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
}

/** Checks a submitted BuildRequest; a malformed one is a 400 naming the field. */
export function parseBuildRequest(body: unknown): BuildRequest {
  const b = body as Partial<BuildRequest> | undefined;
  if (!b || typeof b !== 'object') throw badRequest('body must be a BuildRequest object');
  const str = (k: 'jobId' | 'templateId' | 'specHash') => {
    const v = b[k];
    // Control characters or a lone surrogate would break the status callback's URL (and crash its sender).
    if (typeof v !== 'string' || !v || v.length > 256 || !printableUnicode(v)) throw badRequest(`${k} must be a non-empty string of printable Unicode`);
    return v;
  };
  if (!isValidArtifactId(b.artifactId)) throw badRequest('artifactId must be 1-128 characters of [A-Za-z0-9._-], not starting with a dot or dash');
  const diskSizeMB = b.diskSizeMB ?? 0;
  if (!Number.isInteger(diskSizeMB) || diskSizeMB < 0 || diskSizeMB > MAX_DISK_MB) throw badRequest('diskSizeMB must be an integer of 0 (fit) or more');
  if (b.withSvcCa !== undefined && typeof b.withSvcCa !== 'boolean') throw badRequest('withSvcCa must be a boolean');
  if (b.queue !== undefined && (typeof b.queue !== 'string' || b.queue.length > MAX_QUEUE_CHARS)) throw badRequest(`queue must be a string of at most ${MAX_QUEUE_CHARS} characters`);
  return {
    jobId: str('jobId'),
    templateId: str('templateId'),
    specHash: str('specHash'),
    artifactId: b.artifactId,
    source: parseSource(b.source),
    withSvcCa: b.withSvcCa ?? false,
    diskSizeMB,
    ...(b.queue !== undefined ? { queue: b.queue } : {}),
  };
}

function parseSource(s: unknown): BuildSource {
  const src = s as Record<string, unknown> | undefined;
  if (!src || typeof src !== 'object') throw badRequest('source must be an object');
  const needString = (k: string) => {
    if (typeof src[k] !== 'string' || !src[k]) throw badRequest(`source.${k} must be a non-empty string`);
    return src[k] as string;
  };
  const optString = (k: string) => {
    if (src[k] !== undefined && typeof src[k] !== 'string') throw badRequest(`source.${k} must be a string`);
    return src[k] as string | undefined;
  };
  const platform = () => {
    const p = src.platform as Record<string, unknown> | undefined;
    if (p === undefined) return undefined;
    if (typeof p?.os !== 'string' || typeof p?.architecture !== 'string' || (p.variant !== undefined && typeof p.variant !== 'string')) {
      throw badRequest('source.platform must be {os, architecture, variant?}');
    }
    return { os: p.os, architecture: p.architecture, variant: p.variant as string | undefined };
  };
  const absolutePath = () => {
    const path = needString('path');
    if (!path.startsWith('/')) throw badRequest('source.path must be an absolute path on the template center host');
    return path;
  };
  switch (src.kind) {
    case 'registry': {
      const auth = src.auth as Record<string, unknown> | undefined;
      if (auth !== undefined && (typeof auth?.username !== 'string' || typeof auth?.password !== 'string')) {
        throw badRequest('source.auth must be {username, password}');
      }
      if (src.insecure !== undefined && typeof src.insecure !== 'boolean') throw badRequest('source.insecure must be a boolean');
      return {
        kind: 'registry', ref: needString('ref'), platform: platform(), insecure: src.insecure as boolean | undefined,
        auth: auth ? { username: auth.username as string, password: auth.password as string } : undefined,
      };
    }
    case 'oci-layout': return { kind: 'oci-layout', path: absolutePath(), ref: optString('ref'), platform: platform() };
    case 'docker-archive': return { kind: 'docker-archive', path: absolutePath() };
    case 'rootfs-tar': return { kind: 'rootfs-tar', path: absolutePath() };
    case 'debian-rootfs': {
      const flavor = needString('flavor');
      if (!(DEBIAN_ROOTFS_FLAVORS as readonly string[]).includes(flavor)) throw badRequest(`source.flavor must be one of ${DEBIAN_ROOTFS_FLAVORS.join(', ')}`);
      const recipe = optString('recipe');
      return { kind: 'debian-rootfs', flavor: flavor as DebianRootfsFlavor, ...(recipe ? { recipe } : {}) };
    }
    default: throw badRequest('source.kind must be registry, oci-layout, docker-archive, rootfs-tar or debian-rootfs');
  }
}
