import { SvcError } from '@svc/common';
import { usableBy } from '../teams/ownership.ts';
import type { ResolvedTemplate, TemplateResolver } from '../sandboxes/ports.ts';
import { layerRefOf } from './catalog.ts';
import type { LayerStorage } from './ports.ts';
import type { SnapshotRepo } from './repo.ts';

/**
 * What a create's `templateID` names: a template (id or alias) first, else a snapshot (id or
 * name), as E2B's `Sandbox.create(snapshotId)` passes a snapshot where a template goes. A
 * snapshot starts from its template's artifact with its captured layer, which the node downloads
 * from the artifact store when it lacks it, with the environment its sandbox had. Neither: the template's 404.
 */
export class SnapshotAwareResolver implements TemplateResolver {
  constructor(private readonly templates: TemplateResolver, private readonly snapshots: SnapshotRepo, private readonly storage: LayerStorage) {}

  async resolveForCreate(ref: string, caller?: string): Promise<ResolvedTemplate> {
    try {
      return await this.templates.resolveForCreate(ref, caller);
    } catch (err) {
      if (!(err instanceof SvcError) || err.status !== 404) throw err;
      const s = await this.snapshots.resolve(ref);
      if (!s || !usableBy(caller, { teamId: s.team_id })) throw err;
      return {
        templateId: s.template_id,
        artifact: await this.templates.artifactRef(s.artifact_id),
        cpuCount: Number(s.cpu_count), memoryMB: Number(s.memory_mb), diskSizeMB: Number(s.disk_size_mb),
        envVars: JSON.parse(s.env_vars) as Record<string, string>,
        layer: { snapshotId: s.snapshot_id, ref: layerRefOf(s, this.storage) },
        owner: { teamId: s.team_id },
        ...(s.volume_mounts ? { volumeMounts: volumeMountsOf(s.volume_mounts) } : {}),
      };
    }
  }

  idsFor(ref: string): Promise<string[]> { return this.templates.idsFor(ref); }
  artifactRef(artifactId: string) { return this.templates.artifactRef(artifactId); }
}

/** A snapshot's recorded mounts: those with a volume id (a mount recorded without one is left out). */
function volumeMountsOf(json: string): Array<{ volumeId: string; path: string; readOnly: boolean }> {
  const list = JSON.parse(json) as Array<{ volumeId?: string; path: string; readOnly: boolean }>;
  return list.filter((m): m is { volumeId: string; path: string; readOnly: boolean } => typeof m.volumeId === 'string').map((m) => ({ volumeId: m.volumeId, path: m.path, readOnly: m.readOnly === true }));
}
