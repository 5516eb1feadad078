import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { notFound, SvcError } from '@svc/common';
import type { SandboxRecord } from '@svc/contracts/master';
import type { ExecOnNode, NodeAgentClient } from '@svc/contracts/node-agent';
import { MASTER_DOWNLOAD_ROUTES } from '@svc/contracts/master-downloads';
import { pathTo } from '@svc/contracts/route-table';
import type { ResolvedTemplate } from '../../sandboxes/ports.ts';
import type { SnapshotDbRow } from '../../snapshots/repo.ts';
import type { TemplateRow } from '../../templates/tables.ts';

/** The base template every fake build starts from (`fromTemplate: 'base'`). */
const base: ResolvedTemplate = {
  templateId: 'tpl-base', alias: 'base', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024, envVars: { FROM_BASE: '1' },
  artifact: { artifactId: 'art-1', sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/x' },
};

/** The builder's ports as small fakes that record what the builder asks of them. */
export function fakes() {
  const templates = new Map<string, { row: TemplateRow; built?: string; failed?: string }>();
  const execs: Array<{ sandboxId: string } & ExecOnNode> = [];
  const captures: Array<{ sandboxId: string; cacheKey?: string; buildId?: string; envVars?: Record<string, string> }> = [];
  /** The layer each build sandbox started from (a cached step's capture), by sandbox. */
  const startedFrom = new Map<string, string | undefined>();
  let failCaptures = false;
  const killed: string[] = [];
  const snapshots: SnapshotDbRow[] = [];
  const uploaded = new Set<string>();
  /** Image templates the builder asked for, by image, and how their builds stand. */
  const images = new Map<string, { id: string; status: string; error: string | null; auth?: unknown; requester?: { teamId: string } }>();
  let exitCodes: Record<string, number> = {};
  /** Commands that wait for this before they answer. */
  const held = new Map<string, Promise<void>>();
  let n = 0;
  return {
    templates, execs, captures, killed, uploaded, images, held, startedFrom,
    failStepCaptures(on: boolean) { failCaptures = on; },
    failCommand(command: string, code: number) { exitCodes = { [command]: code }; },
    ports: {
      templates: {
        async forBuild(alias: string, sizes: { cpuCount: number; memoryMB: number }, owner?: { teamId?: string }) {
          const have = [...templates.values()].find((t) => t.row.alias === alias);
          if (have) return have.row;
          const row = { template_id: `tpl-${++n}`, alias, cpu_count: sizes.cpuCount, memory_mb: sizes.memoryMB, team_id: owner?.teamId ?? DEFAULT_TEAM_ID } as TemplateRow;
          templates.set(row.template_id, { row });
          return row;
        },
        async builderBuilt(id: string, r: { snapshotId: string }) { templates.get(id)!.built = r.snapshotId; },
        async builderFailed(id: string, error: string) { templates.get(id)!.failed = error; },
        async idOf(ref: string) { return [...templates.values()].find((t) => t.row.alias === ref || t.row.template_id === ref)?.row.template_id; },
        async teamOf(ref: string) { return [...templates.values()].find((t) => t.row.alias === ref || t.row.template_id === ref)?.row.team_id; },
        async imageTemplate(image: string, auth: unknown, requester: { teamId: string }) {
          const have = images.get(image);
          if (have) return have.id;
          const made = { id: `tpl-img-${++n}`, status: 'building', error: null, auth, requester };
          images.set(image, made);
          return made.id;
        },
        async buildState(id: string) {
          const t = templates.get(id);
          return [...images.values()].find((i) => i.id === id) ?? (t ? { status: t.built ? 'ready' : 'building', error: t.failed ?? null } : undefined);
        },
      },
      resolver: {
        async resolveForCreate(ref: string) {
          if (ref.startsWith('tpl-img-')) return { ...base, templateId: ref, alias: undefined, artifact: { ...base.artifact, artifactId: `art-${ref}`, sha256: 'b'.repeat(64) } };
          if (ref !== 'base') throw notFound(`template ${ref} not found`);
          return base;
        },
        async idsFor(ref: string) { return [ref]; },
        async artifactRef() { return base.artifact; },
      },
      files: {
        // Team-blind: the team's own store is ContextFiles' (context-files.test.ts).
        async input(hash: string, team: string) { return uploaded.has(hash) ? { url: pathTo(MASTER_DOWNLOAD_ROUTES.templateFiles, { team, hash }), sha256: 'c'.repeat(64), sizeBytes: 10 } : undefined; },
        async uploadLink(hash: string, _team: string, origin: string) { return uploaded.has(hash) ? { present: true } : { present: false, url: `${origin}/templates/files/${hash}?signed` }; },
      },
      sandboxes: {
        async create(_input: unknown, resolved: ResolvedTemplate) {
          const sandboxId = `sbx-${++n}`;
          startedFrom.set(sandboxId, resolved.layer?.snapshotId);
          return { sandboxId, nodeId: 'n1' } as SandboxRecord;
        },
        async kill(id: string) { killed.push(id); },
      },
      snapshots: {
        async capture(sandboxId: string, o: { cacheKey?: string; buildId?: string; envVars?: Record<string, string> }) {
          if (failCaptures && execs.at(-1)?.command !== 'whoami') throw new SvcError(507, 'no room for it');
          captures.push({ sandboxId, ...o });
          const row = { snapshot_id: `snap-${++n}`, size_bytes: 2048, cache_key: o.cacheKey ?? null } as SnapshotDbRow;
          snapshots.push(row);
          return row;
        },
        async byCacheKey(key: string) { return snapshots.findLast((s) => s.cache_key === key); },
        async layerOf(id: string) { return snapshots.some((s) => s.snapshot_id === id) ? { ref: { layerId: id, sha256: 'd'.repeat(64), sizeBytes: 1 } } : undefined; },
      },
      nodes: {
        async client() {
          return {
            async exec(sandboxId: string, req: ExecOnNode, onOutput?: (stream: 'stdout' | 'stderr', text: string) => void) {
              execs.push({ sandboxId, ...req });
              onOutput?.('stdout', 'ran ');
              await held.get(req.command);
              const code = exitCodes[req.command] ?? 0;
              onOutput?.('stdout', `${req.command}\n`);
              if (code) onOutput?.('stderr', 'it broke\n');
              if (req.command === 'chatty') for (let i = 1; i <= 1500; i++) onOutput?.('stdout', `line ${i}\n`);
              return { exitCode: code, stdout: `ran ${req.command}\n`, stderr: code ? 'it broke\n' : '' };
            },
          } as unknown as NodeAgentClient;
        },
      },
    },
  };
}
