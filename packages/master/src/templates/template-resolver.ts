import type { SvcConfig } from '@svc/common';
import type { LayerRef, RuntimeKind } from '@svc/contracts/node-agent';
import type { ImageInfo } from '@svc/contracts/template-center';
import type { ResolvedTemplate, TemplateResolver } from '../sandboxes/ports.ts';
import { artifactRef } from './artifact-url.ts';
import type { BuilderStatus } from './builder-port.ts';
import { invalidTemplateRequest, templateNotFound } from './errors.ts';
import { isPlatformTemplate, platformTemplateReady } from './platform-templates.ts';
import type { ArtifactStore } from './store/artifacts.ts';
import type { TemplateStore } from './store/templates.ts';
import type { TemplateRow } from './tables.ts';
import { usableBy } from '../teams/ownership.ts';
import { ownerOf } from './template-owner.ts';

/** Whom a template's start command runs as when its build or image recorded no user (E2B's default user). */
const BUILD_DEFAULT_USER = 'user';

/** Where a built template's files are: a build snapshot's layer, over its artifact. */
export interface BuiltLayers {
  layerOf(snapshotId: string): Promise<{ artifactId: string; envVars: Record<string, string>; ref: LayerRef } | undefined>;
}

interface TemplateResolverDeps {
  cfg: SvcConfig;
  templates: TemplateStore;
  artifacts: ArtifactStore;
  /** The layers of templates the builder made (the snapshot module's). */
  builtLayers?: BuiltLayers;
  /** The builder's tags (a create of `name:tag`). */
  builder?: Pick<BuilderStatus, 'snapshotOfTag'>;
}

/**
 * The resolver sandbox create uses: what a template reference (id, alias, or `name:tag`) starts
 * a sandbox from, whether an image template's artifact or a built template's build snapshot.
 */
export function templateResolver(d: TemplateResolverDeps): TemplateResolver {
  const resolveArtifact = async (artifactId: string) => {
    const a = await d.artifacts.get(artifactId);
    if (!a || a.status !== 'READY') throw invalidTemplateRequest(`template artifact ${artifactId} is ${a?.status ?? 'gone'}; a sandbox needs a ready one`);
    return artifactRef(d.cfg.master.addr, a);
  };

  /** A template the builder made: its build snapshot's layer over that snapshot's artifact. */
  const resolveBuilt = async (t: TemplateRow, snapshotId: string): Promise<ResolvedTemplate> => {
    const layer = await d.builtLayers?.layerOf(snapshotId);
    if (!layer) throw invalidTemplateRequest(`template ${t.template_id}: its build's files (${snapshotId}) are gone; build it again`);
    const info = imageInfoOf(t);
    return {
      templateId: t.template_id, alias: t.alias ?? undefined, artifact: await resolveArtifact(layer.artifactId),
      cpuCount: Number(t.cpu_count), memoryMB: Number(t.memory_mb), diskSizeMB: Number(t.disk_size_mb),
      envVars: layer.envVars, layer: { snapshotId, ref: layer.ref }, owner: ownerOf(t), ...runtimeOf(t),
      ...(info.user ? { defaultUser: info.user } : {}), ...(info.workingDir ? { defaultWorkdir: info.workingDir } : {}),
      ...startOf(t, info),
    };
  };

  /** `name:tag`: the build of a template the builder made that the tag names. */
  const resolveTagged = async (ref: string, caller: string | undefined): Promise<ResolvedTemplate> => {
    const [name, tag] = ref.split(':', 2);
    const t = await d.templates.resolve(name);
    if (t && !usableBy(caller, ownerOf(t))) throw templateNotFound(ref);
    const snapshotId = t && await d.builder?.snapshotOfTag(t.template_id, tag);
    if (!t || !snapshotId) throw templateNotFound(ref);
    return resolveBuilt(t, snapshotId);
  };

  const resolveForCreate = async (ref: string, caller?: string): Promise<ResolvedTemplate> => {
    if (ref.includes(':')) return resolveTagged(ref, caller);
    let t = await d.templates.resolve(ref);
    // Another team's private template is unknown before its state is told: a status or a build's
    // error answered to any team was a way to learn its names and its failures (found by a helper
    // reading the master as an attacker).
    if (!t || !usableBy(caller, ownerOf(t))) throw templateNotFound(ref);
    if (isPlatformTemplate(t)) t = await platformTemplateReady(d.templates, t, d.cfg.master.create_timeout_insec);
    if (t.status === 'ready' && t.layer_snapshot_id) return resolveBuilt(t, t.layer_snapshot_id);
    if (t.status !== 'ready' || !t.artifact_id) {
      throw invalidTemplateRequest(`template ${ref} is ${t.status}${t.error ? ` (${t.error})` : ''}; a sandbox needs a ready template`);
    }
    const a = await d.artifacts.get(t.artifact_id);
    if (!a || a.status !== 'READY') {
      throw invalidTemplateRequest(`template ${ref} has no ready artifact (${t.artifact_id} is ${a?.status ?? 'missing'}); redo the template`);
    }
    return {
      templateId: t.template_id, alias: t.alias ?? undefined, artifact: artifactRef(d.cfg.master.addr, a),
      cpuCount: Number(t.cpu_count), memoryMB: Number(t.memory_mb), diskSizeMB: Number(t.disk_size_mb),
      ...imageDefaults(t), owner: ownerOf(t), ...runtimeOf(t),
    };
  };

  return {
    resolveForCreate,
    idsFor: async (ref) => [(await d.templates.resolve(ref))?.template_id ?? ref],
    artifactRef: resolveArtifact,
  };
}

/** A template's start command, if it has one, as its sandboxes run it: as its user, in its directory. */
function startOf(t: TemplateRow, info: Partial<ImageInfo>): Pick<ResolvedTemplate, 'start'> {
  if (!t.start_cmd) return {};
  return { start: { command: t.start_cmd, ...(t.ready_cmd ? { readyCommand: t.ready_cmd } : {}), user: info.user ?? BUILD_DEFAULT_USER, ...(info.workingDir ? { cwd: info.workingDir } : {}) } };
}

/** The image config a template recorded, read once per resolve; unreadable is none. */
function imageInfoOf(t: TemplateRow): Partial<ImageInfo> {
  if (!t.image_info) return {};
  try {
    return JSON.parse(t.image_info) as Partial<ImageInfo>;
  } catch {
    // A row whose image_info does not parse is read as one that recorded nothing: its sandboxes get the defaults.
    return {};
  }
}

/** What an image template's sandboxes start with: the image config's Env and the template's start command. */
function imageDefaults(t: TemplateRow): Pick<ResolvedTemplate, 'envVars' | 'start'> {
  const info = imageInfoOf(t);
  return { envVars: imageEnv(info), ...startOf(t, info) };
}

/** `KEY=value` pairs of the image config's Env, as a map. */
function imageEnv(info: Partial<ImageInfo>): Record<string, string> {
  const env: unknown = info.env;
  const out: Record<string, string> = {};
  if (!Array.isArray(env)) return out;
  for (const kv of env) {
    if (typeof kv !== 'string') continue;
    const i = kv.indexOf('=');
    if (i > 0) out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

/** The template's runtime, when it names one (TemplateCreate.runtime). */
function runtimeOf(t: TemplateRow): { runtime?: RuntimeKind } {
  return t.runtime === 'gvisor' || t.runtime === 'microvm' ? { runtime: t.runtime } : {};
}
