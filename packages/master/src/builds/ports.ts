/** What the template builder needs from the rest of the master, as small interfaces. */
import type { CreateSandboxInput, SandboxRecord } from '@svc/contracts/master';
import type { ExecInput, NodeAgentClient } from '@svc/contracts/node-agent';
import type { ResolvedTemplate } from '../sandboxes/ports.ts';
import type { LayerRef } from '@svc/contracts/node-agent';
import type { SnapshotDbRow } from '../snapshots/repo.ts';
import type { SnapshotRow } from '../snapshots/tables.ts';
import type { TemplateRow } from '../templates/tables.ts';

/** The template rows builds make and finish (the template module's). */
export interface BuilderTemplates {
  /** teamId: the team asking (undefined: the operator); another team's name is taken (409). */
  forBuild(alias: string, sizes: { cpuCount: number; memoryMB: number }, owner?: { teamId?: string }): Promise<TemplateRow>;
  builderBuilt(templateId: string, r: { snapshotId: string; startCmd: string | null; readyCmd: string | null; user: string; workdir?: string }): Promise<void>;
  builderFailed(templateId: string, error: string): Promise<void>;
  /** The id of the template an id or alias names, if any. */
  idOf(ref: string): Promise<string | undefined>;
  /** The team of the template an id or alias names, if any. */
  teamOf(ref: string): Promise<string | undefined>;
  /** A template of a registry image to build from, the requesting team's (made when none it may use stands). */
  imageTemplate(image: string, auth: { username: string; password: string } | undefined, requester: { teamId: string }): Promise<string>;
  buildState(templateId: string): Promise<{ status: string; error: string | null } | undefined>;
}

export interface BuildSandboxes {
  create(input: CreateSandboxInput, resolved: ResolvedTemplate): Promise<SandboxRecord>;
  kill(id: string): Promise<void>;
}

export interface BuildSnapshots {
  capture(sandboxId: string, o: { purpose: SnapshotRow['purpose']; cacheKey?: string; buildId?: string; envVars?: Record<string, string> }): Promise<SnapshotDbRow>;
  byCacheKey(key: string): Promise<SnapshotDbRow | undefined>;
  /** A build snapshot's layer, to start a sandbox from (a cached step's files). */
  layerOf(snapshotId: string): Promise<{ ref: LayerRef } | undefined>;
}

export interface BuildNodes {
  client(nodeId: string): Promise<NodeAgentClient>;
}

/** Context files of COPY steps, as the store holds them (context-files.ts). */
export interface BuildFiles {
  /** A team's files of a hash (a team sees only what it uploaded). */
  input(hash: string, teamId: string): Promise<ExecInput | undefined>;
  uploadLink(hash: string, teamId: string, origin: string): Promise<{ present: boolean; url?: string }>;
}
