import type { BuildSource, DebianRootfsFlavor } from '@svc/contracts/template-center';
import type { SvcConfig } from '@svc/common';
import { parseAlias } from './alias.ts';
import { invalidTemplateRequest } from './errors.ts';
import { specHash } from './spec-hash.ts';
import type { SourceKind } from './tables.ts';
import type { TemplateCreate } from '@svc/contracts/template-routes';
import type { RuntimeKind } from '@svc/contracts/node-agent';

/** A validated TemplateCreate. */
export interface CreateSpec {
  alias: string | null;
  sourceKind: SourceKind;
  sourceImageRef: string;
  source: BuildSource;
  withSvcCa: boolean;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  /** Disk size the template center is asked for: 0 = fit the content plus headroom. */
  buildDiskSizeMB: number;
  specHash: string;
  /** Started in each sandbox, which a create waits for until readyCmd passes. */
  startCmd: string | null;
  readyCmd: string | null;
  /** What runs its sandboxes when a create names no runtime; null: the node's default. */
  runtime: RuntimeKind | null;
}

const SOURCES = ['image', 'oci_layout', 'docker_archive', 'rootfs_tar', 'debian_rootfs'] as const;
const OSES = new Set(['linux']);
const ARCHES = new Set(['amd64', 'arm64', 'arm', '386', 'ppc64le', 's390x', 'riscv64']);

/**
 * The rules of a TemplateCreate that its schema (template-route-schemas.ts), already checked by the
 * route, cannot state: exactly one source, paths that are absolute, options that fit the source,
 * the platform's names, the alias rules; then the defaults. `puller` is the team the template is
 * made for, part of the spec of a pull with credentials (spec-hash.ts).
 */
export function parseCreateRequest(b: TemplateCreate, defaults: SvcConfig['svclet_conf'], puller: string): CreateSpec {
  const given = SOURCES.filter((k) => b[k] !== undefined && b[k] !== null && b[k] !== '');
  if (given.length !== 1) {
    throw invalidTemplateRequest(`exactly one source is required: one of ${SOURCES.join(', ')}` +
      (given.length ? ` (got ${given.join(' and ')})` : ''));
  }
  const kind = given[0]!;
  const value = b[kind]!;
  if (/\s/.test(value)) throw invalidTemplateRequest(`${kind} must be a string without spaces`);
  if (kind !== 'image' && kind !== 'debian_rootfs' && !value.startsWith('/')) throw invalidTemplateRequest(`${kind} must be an absolute path (got "${value}")`);

  if (kind !== 'image') {
    for (const k of ['registry_auth', 'insecure_registry'] as const) {
      if (b[k] !== undefined) throw invalidTemplateRequest(`${k} applies only to an image source, not to ${kind}`);
    }
  }
  if (b.platform !== undefined && kind !== 'image' && kind !== 'oci_layout') {
    throw invalidTemplateRequest(`platform applies only to image and oci_layout sources, not to ${kind} (its content decides the platform)`);
  }
  const platform = kind === 'image' || kind === 'oci_layout' ? parsePlatform(b.platform) : undefined;

  let source: BuildSource;
  if (kind === 'image') {
    const auth = b.registry_auth ?? undefined;
    source = { kind: 'registry', ref: value, platform, ...(auth ? { auth } : {}), ...(b.insecure_registry !== undefined ? { insecure: b.insecure_registry } : {}) };
  } else if (kind === 'oci_layout') {
    source = { kind: 'oci-layout', path: value, platform };
  } else if (kind === 'docker_archive') {
    source = { kind: 'docker-archive', path: value };
  } else if (kind === 'rootfs_tar') {
    source = { kind: 'rootfs-tar', path: value };
  } else {
    // The route's schema allows only base or code-interpreter, optionally @<recipe key>.
    const [flavor, recipe] = value.split('@') as [DebianRootfsFlavor, string | undefined];
    source = { kind: 'debian-rootfs', flavor, ...(recipe ? { recipe } : {}) };
  }

  const withSvcCa = parseCaFlag(b.with_cube_ca, b.with_svc_ca);
  const cpuCount = b.cpu_count ?? defaults.default_cpu_count;
  const memoryMB = b.memory_mb ?? defaults.default_memory_mb;
  const diskGiven = b.disk_size_mb ?? undefined;
  // Every node holds the whole image and every sandbox of it may fill it: the operator's cap.
  if (diskGiven !== undefined && diskGiven > defaults.max_disk_size_mb) throw invalidTemplateRequest(`disk_size_mb ${diskGiven} is more than svclet_conf.max_disk_size_mb (${defaults.max_disk_size_mb})`);
  const diskSizeMB = diskGiven ?? defaults.default_disk_size_mb;
  const buildDiskSizeMB = diskGiven ?? 0;
  const startCmd = b.start_cmd?.trim() || null;
  const readyCmd = b.ready_cmd?.trim() || null;
  if (readyCmd && !startCmd) throw invalidTemplateRequest('ready_cmd needs a start_cmd: it says when the start command is ready');
  return {
    startCmd, readyCmd, runtime: b.runtime ?? null,
    alias: parseAlias(b.alias),
    sourceKind: kind, sourceImageRef: value, source, withSvcCa, cpuCount, memoryMB, diskSizeMB, buildDiskSizeMB,
    specHash: specHash(source, withSvcCa, buildDiskSizeMB, puller),
  };
}

function hostPlatform(): { os: string; architecture: string } {
  const arch = ({ x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' } as Record<string, string>)[process.arch];
  return { os: 'linux', architecture: arch ?? process.arch };
}

function parsePlatform(v: string | null | undefined): { os: string; architecture: string; variant?: string } {
  if (v === undefined || v === null || v === '') return hostPlatform();
  const parts = v.split('/');
  if (parts.length < 2 || parts.length > 3 || parts.some((p) => !/^[a-z0-9]+$/.test(p))) {
    throw invalidTemplateRequest(`platform "${v}" is invalid: use os/arch[/variant], for example linux/amd64 or linux/arm64/v8`);
  }
  const [os, architecture, variant] = parts;
  if (!OSES.has(os)) throw invalidTemplateRequest(`platform "${v}": os must be linux`);
  if (!ARCHES.has(architecture)) throw invalidTemplateRequest(`platform "${v}": unknown architecture ${architecture} (known: ${[...ARCHES].join(', ')})`);
  return variant ? { os, architecture, variant } : { os, architecture };
}

/** `with_cube_ca` is the upstream name (docs/templates.md), `with_svc_ca` ours; both default true and must agree when both are sent. */
function parseCaFlag(cube: boolean | null | undefined, svc: boolean | null | undefined): boolean {
  const a = cube ?? undefined;
  const b = svc ?? undefined;
  if (a !== undefined && b !== undefined && a !== b) throw invalidTemplateRequest('with_cube_ca and with_svc_ca disagree; send one of them');
  return a ?? b ?? true;
}
