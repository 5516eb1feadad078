import { createHash } from 'node:crypto';
import type { E2bBuildStart } from '@svc/contracts/template-routes';
import type { ResolvedTemplate } from '../sandboxes/ports.ts';
import type { Step } from './build-spec.ts';
import type { BuildSnapshots } from './ports.ts';

/** The cache keys of a build's steps (each after the steps before it) and of what the build makes. */
export interface CacheKeys { steps: string[]; final: string }

/**
 * A build's cache keys (docs/templates.md, "The build cache"): each step's is the hash of the key
 * before it (the base's files and the team first) and the step (type, arguments, files hash);
 * the build's is the last step's, or with a start command (which may write files) the hash of
 * that and the commands.
 */
export function cacheKeys(base: ResolvedTemplate, steps: Step[], start: Pick<E2bBuildStart, 'startCmd' | 'readyCmd'>, teamId: string): CacheKeys {
  const sha = (v: unknown) => createHash('sha256').update(JSON.stringify(v)).digest('hex');
  // The team is part of every key: a step's files are what it made for that team (a key it
  // generated, a private repository its egress rules let it clone), never another team's to
  // reuse by writing the same step (docs/templates.md, "The build cache").
  let key = sha({ base: { artifact: base.artifact.sha256, layer: base.layer?.ref.sha256 ?? null }, team: teamId });
  const keys = steps.map((s) => (key = sha({ after: key, step: { type: s.type, args: s.args ?? [], filesHash: s.filesHash ?? null } })));
  const last = keys.at(-1);
  const final = last && !start.startCmd && capturesFiles(steps.at(-1)!) ? last : sha({ after: key, start: [start.startCmd ?? null, start.readyCmd ?? null] });
  return { steps: keys, final };
}

/**
 * Steps after which the build keeps a capture for the cache: those that do work. ENV changes only
 * the steps' state; WORKDIR and USER are cheap to do again after the capture before them.
 */
export function capturesFiles(step: Step): boolean {
  return step.type === 'RUN' || step.type === 'COPY';
}

/**
 * The longest run of first steps (before `usable`, where a forced step starts) whose files an
 * earlier build captured: the build resumes after it, from that capture.
 */
export async function cachedPrefix(snapshots: BuildSnapshots, steps: Step[], keys: string[], usable: number): Promise<{ after: number; snapshotId: string } | undefined> {
  for (let i = usable - 1; i >= 0; i--) {
    if (!capturesFiles(steps[i])) continue;
    const hit = await snapshots.byCacheKey(keys[i]);
    if (hit) return { after: i + 1, snapshotId: hit.snapshot_id };
  }
  return undefined;
}
