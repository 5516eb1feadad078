import type { E2bBuildStatus, E2bBuildStatusAnswer } from '@svc/contracts/template-routes';

/** A builder build as a template's answers list it (E2B's TemplateBuild); times in epoch ms. */
export interface BuilderBuild {
  buildId: string;
  status: E2bBuildStatus;
  cpuCount: number;
  memoryMB: number;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
}

/** What the template module asks the template builder (builds/): a build's status, a tag's build, a template's builds. */
export interface BuilderStatus {
  /** Undefined when `buildId` is no builder build of the template (E2B's one status route serves both kinds). */
  status(templateId: string, buildId: string, q: { logsOffset?: number; limit?: number; level?: string }): Promise<E2bBuildStatusAnswer | undefined>;
  /** The build snapshot a tag of a built template names (a create of `name:tag`). */
  snapshotOfTag(templateId: string, tag: string): Promise<string | undefined>;
  /** The template's builder builds, oldest first (E2B's GET /templates answers list every build of a template). */
  buildsOf(templateId: string): Promise<BuilderBuild[]>;
}
