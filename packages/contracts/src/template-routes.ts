/**
 * The TypeScript types of the template routes (docs/api.md "Templates"), derived by the compiler
 * from the schemas the master validates and serializes with (template-route-schemas.ts); shared
 * by the master, our SDK and CLI, and the SDK's fake.
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type * as S from './template-route-schemas.ts';

type Wire<Schema extends JSONSchema> = FromSchema<Schema, { keepDefaultedPropertiesOptional: true }>;

export type TemplateStatus = (typeof S.TEMPLATE_STATUSES)[number];
export type JobKind = (typeof S.JOB_KINDS)[number];
export type JobStatus = (typeof S.JOB_STATUSES)[number];
export type JobPhase = (typeof S.JOB_PHASES)[number];
export type SourceKind = (typeof S.SOURCE_KINDS)[number];
export type E2bBuildStatus = (typeof S.E2B_BUILD_STATUSES)[number];

export type TemplateCreate = Wire<typeof S.TemplateCreate>;
export type TemplateInfo = Wire<typeof S.TemplateInfo>;
export type ImageInfo = Wire<typeof S.ImageInfo>;
export type JobInfo = Wire<typeof S.JobInfo>;
export type JobAccepted = Wire<typeof S.JobAccepted>;
export type TemplateRef = Wire<typeof S.TemplateRef>;
export type TemplateAlias = Wire<typeof S.TemplateAlias>;
export type E2bTemplate = Wire<typeof S.E2bTemplate>;
export type E2bTemplateDetail = Wire<typeof S.E2bTemplateDetail>;
/** One build of a template (E2B's TemplateBuild), whatever made it. */
export type E2bTemplateBuild = E2bTemplateDetail['builds'][number];
export type E2bTemplateCreated = Wire<typeof S.E2bTemplateCreated>;
export type E2bTemplateAlias = Wire<typeof S.E2bTemplateAlias>;
export type E2bBuildStatusAnswer = Wire<typeof S.E2bBuildStatus>;
export type E2bBuildRequest = Wire<typeof S.E2bBuildRequest>;
export type E2bBuildRequested = Wire<typeof S.E2bBuildRequested>;
export type E2bBuildStart = Wire<typeof S.E2bBuildStart>;
export type BuildStepType = (typeof S.BUILD_STEP_TYPES)[number];
export type E2bAssignTags = Wire<typeof S.E2bAssignTags>;
export type E2bFileUpload = Wire<typeof S.E2bFileUpload>;
export type E2bDeleteTags = Wire<typeof S.E2bDeleteTags>;

/** The sources a TemplateCreate names as files on the platform's host, which the template center reads as root: the operator's alone (docs/security.md). */
const HOST_FILE_SOURCES = ['oci_layout', 'docker_archive', 'rootfs_tar'] as const;

/** The host file source a TemplateCreate-shaped body names, if any (a field present and not empty). */
export function hostFileSourceOf(body: unknown): (typeof HOST_FILE_SOURCES)[number] | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as Record<string, unknown>;
  return HOST_FILE_SOURCES.find((k) => b[k] !== undefined && b[k] !== null && b[k] !== '');
}
