/**
 * The template builder's request and answer schemas (E2B's TemplateBuildRequestV3, TemplateStep,
 * TemplateBuildStartV2, tags, build logs, file uploads): the JSON Schemas the master validates and
 * serializes its builder routes with, part of the public document through TEMPLATE_SCHEMAS
 * (template-route-schemas.ts).
 */
const str = { type: 'string' } as const;
const bool = { type: 'boolean' } as const;
const timestamp = { type: 'string', format: 'date-time' } as const;
const stringList = { type: 'array', items: str } as const;

/** The step types the template builder runs (E2B's TemplateStep.type). */
export const BUILD_STEP_TYPES = ['RUN', 'ENV', 'WORKDIR', 'USER', 'COPY'] as const;

/** POST /v3/templates (E2B's TemplateBuildRequestV3): a build of a template named `name[:tag]`. */
export const E2bBuildRequest = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 160, description: 'The template\'s name, with an optional :tag' },
    alias: { type: 'string', minLength: 1, maxLength: 160, description: 'Deprecated: name' },
    tags: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 128 }, maxItems: 32 },
    cpuCount: { type: 'integer', minimum: 1, maximum: 64 },
    memoryMB: { type: 'integer', minimum: 128, maximum: 1024 * 1024 },
    minFreeDiskMb: { type: 'integer', minimum: 0 },
    teamID: str,
  },
  additionalProperties: false,
} as const;

/** E2B's TemplateRequestResponseV3. */
export const E2bBuildRequested = {
  type: 'object',
  required: ['templateID', 'buildID', 'names', 'aliases', 'tags', 'public'],
  properties: { templateID: str, buildID: str, names: stringList, aliases: stringList, tags: stringList, public: bool },
  additionalProperties: false,
} as const;

/** One step (E2B's TemplateStep); the SDK sends its builder's own fields beside these, ignored. */
export const E2bBuildStep = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { type: 'string', enum: BUILD_STEP_TYPES },
    args: { type: 'array', items: { type: 'string', maxLength: 65536 }, maxItems: 256 },
    filesHash: str,
    force: bool,
    /** COPY: whether the uploaded archive is gzipped (the SDK's default; svc reads it). */
    gzip: bool,
  },
} as const;

/** POST /v2/templates/{templateID}/builds/{buildID} (E2B's TemplateBuildStartV2). */
export const E2bBuildStart = {
  type: 'object',
  properties: {
    fromImage: str,
    fromTemplate: str,
    fromImageRegistry: { type: 'object' },
    steps: { type: 'array', items: E2bBuildStep, maxItems: 1000 },
    startCmd: str,
    readyCmd: str,
    force: bool,
  },
  additionalProperties: false,
} as const;

const tagList = { type: 'array', items: { type: 'string', minLength: 1, maxLength: 128 }, minItems: 1, maxItems: 32 } as const;

/** POST /templates/tags (E2B's AssignTemplateTagsRequest): `target` is `name:tag` or `name`. */
export const E2bAssignTags = {
  type: 'object', required: ['target', 'tags'],
  properties: { target: { type: 'string', minLength: 1, maxLength: 300 }, tags: tagList },
  additionalProperties: false,
} as const;

export const E2bAssignedTags = {
  type: 'object', required: ['buildID', 'tags'], properties: { buildID: str, tags: stringList }, additionalProperties: false,
} as const;

/** DELETE /templates/tags (E2B's DeleteTemplateTagsRequest). */
export const E2bDeleteTags = {
  type: 'object', required: ['name', 'tags'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 160 }, tags: tagList },
  additionalProperties: false,
} as const;

export const E2bTemplateTag = {
  type: 'object', required: ['tag', 'buildID', 'createdAt'], properties: { tag: str, buildID: str, createdAt: timestamp }, additionalProperties: false,
} as const;

/** GET /templates/{templateID}/builds/{buildID}/logs (E2B's TemplateBuildLogsResponse). */
export const E2bBuildLogs = {
  type: 'object', required: ['logs'],
  properties: {
    logs: {
      type: 'array',
      items: {
        type: 'object', required: ['timestamp', 'level', 'message'],
        properties: { timestamp, level: { type: 'string', enum: ['debug', 'info', 'warn', 'error'] }, message: str, step: str },
        additionalProperties: false,
      },
    },
  },
  additionalProperties: false,
} as const;

/** GET /templates/{templateID}/files/{hash} (E2B's TemplateBuildFileUpload). */
export const E2bFileUpload = {
  type: 'object', required: ['present'],
  properties: { present: { type: 'boolean' }, url: { type: 'string', description: 'Where to PUT the archive (signed, no API key); absent when present' } },
  additionalProperties: false,
} as const;
