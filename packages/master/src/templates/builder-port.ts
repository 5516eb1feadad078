import type { E2bBuildStatusAnswer } from '@svc/contracts/template-routes';

/** What the template module asks the template builder (builds/): a build's status, a tag's build. */
export interface BuilderStatus {
  /** Undefined when `buildId` is no builder build of the template (E2B's one status route serves both kinds). */
  status(templateId: string, buildId: string, q: { logsOffset?: number; limit?: number; level?: string }): Promise<E2bBuildStatusAnswer | undefined>;
  /** The build snapshot a tag of a built template names (a create of `name:tag`). */
  snapshotOfTag(templateId: string, tag: string): Promise<string | undefined>;
}
