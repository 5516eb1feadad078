/**
 * The shapes of the template routes (docs/api.md "Templates"), as JSON Schemas that the public
 * OpenAPI document names (public-api.ts), the master validates and serializes with, and
 * template-routes.ts turns into TypeScript types.
 *
 * svc's own routes (`/svc/template...`) speak snake case, as the CLI and the E2B-style tools
 * send it; the E2B routes (`/templates...`) answer in E2B's camel case. What a schema cannot say
 * (exactly one source, absolute paths, alias rules, platform names) the master checks and names
 * in its 400 (code 130400).
 */

import { RUNTIME_KINDS } from './node-agent.ts';
import { E2bBuildRequest, E2bBuildRequested, E2bBuildStart, E2bAssignTags, E2bAssignedTags, E2bDeleteTags, E2bTemplateTag, E2bBuildLogs, E2bFileUpload } from './builder-route-schemas.ts';

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const timestamp = { type: 'string', format: 'date-time' } as const;
const nullableString = { type: ['string', 'null'] } as const;
const stringList = { type: 'array', items: str } as const;
/** A source: a registry reference or an absolute path on the master's host; "" or null is "not this one". */
const source = (description: string) => ({ type: ['string', 'null'], maxLength: 4096, description }) as const;
const size = (minimum: number, maximum: number, description: string) => ({ type: ['integer', 'null'], minimum, maximum, description }) as const;

export const TEMPLATE_STATUSES = ['building', 'ready', 'failed'] as const;
export const JOB_KINDS = ['CREATE', 'REDO', 'LEGACY'] as const;
export const JOB_STATUSES = ['PENDING', 'RUNNING', 'BUILT', 'FAILED'] as const;
export const JOB_PHASES = ['PULLING', 'BUILDING', 'UPLOADING', 'DISTRIBUTING'] as const;
export const SOURCE_KINDS = ['image', 'oci_layout', 'docker_archive', 'rootfs_tar', 'debian_rootfs', 'legacy', 'builder'] as const;
/** E2B's build status, as its template routes answer it. */
export const E2B_BUILD_STATUSES = ['building', 'waiting', 'ready', 'error'] as const;

export const TemplateCreate = {
  type: 'object',
  properties: {
    image: source('A registry reference, e.g. docker.io/library/python:3.12'),
    oci_layout: source('Absolute path of an OCI image layout directory'),
    docker_archive: source('Absolute path of a `docker save` archive'),
    rootfs_tar: source('Absolute path of a root filesystem tar'),
    debian_rootfs: {
      type: ['string', 'null'], pattern: '^(base|code-interpreter)(@[0-9a-f]{16})?$',
      description: 'A root filesystem the template center makes from Debian\'s packages: base or code-interpreter, optionally @ the recipe key it must have (svc up makes its templates this way)',
    },
    alias: { ...nullableString, description: '1 to 64 characters from [a-z0-9-]; not tpl-...' },
    registry_auth: {
      type: ['object', 'null'],
      required: ['username', 'password'],
      properties: { username: { type: 'string', minLength: 1 }, password: str },
      additionalProperties: false,
      description: 'Only with image',
    },
    insecure_registry: { ...bool, description: 'Plain HTTP to the registry (loopback registries need not say so); only with image' },
    platform: { ...nullableString, description: 'os/arch[/variant], default the host\'s; only with image and oci_layout' },
    with_cube_ca: { type: ['boolean', 'null'], description: 'Install the egress CA (upstream name); default true' },
    with_svc_ca: { type: ['boolean', 'null'], description: 'Install the egress CA; default true' },
    cpu_count: size(1, 256, 'Default vCPUs of its sandboxes'),
    memory_mb: size(64, 4 * 1024 * 1024, 'Default memory of its sandboxes'),
    disk_size_mb: size(64, 16 * 1024 * 1024, 'Disk size; default: fits the content'),
    start_cmd: { type: ['string', 'null'], maxLength: 4096, description: 'Started in the background in each sandbox (as `user`); the create answers once ready_cmd passes (docs/templates.md)' },
    ready_cmd: { type: ['string', 'null'], maxLength: 4096, description: 'Run until it exits 0 before a create answers; only with start_cmd' },
    runtime: { type: ['string', 'null'], enum: [...RUNTIME_KINDS, null], description: 'What runs its sandboxes when a create names none (docs/runtimes.md); default: the node\'s' },
  },
  additionalProperties: false,
} as const;

export const ImageInfo = {
  type: 'object',
  required: ['layers', 'sizeBytes'],
  properties: {
    digest: { ...str, description: 'Digest of the manifest that was built' },
    os: str,
    architecture: str,
    layers: int,
    sizeBytes: { ...int, description: 'Compressed bytes pulled' },
    env: stringList,
    workingDir: str,
    user: str,
    entrypoint: stringList,
    cmd: stringList,
  },
  additionalProperties: false,
} as const;

export const TemplateInfo = {
  type: 'object',
  required: [
    'template_id', 'alias', 'status', 'source_kind', 'source_image_ref', 'latest_job_id', 'artifact_id', 'created_at', 'updated_at',
    'image_info', 'cpu_count', 'memory_mb', 'disk_size_mb', 'with_cube_ca', 'legacy', 'error',
  ],
  properties: {
    template_id: str,
    alias: nullableString,
    status: { type: 'string', enum: TEMPLATE_STATUSES },
    source_kind: { type: 'string', enum: SOURCE_KINDS },
    source_image_ref: str,
    latest_job_id: nullableString,
    artifact_id: nullableString,
    created_at: timestamp,
    updated_at: timestamp,
    image_info: { anyOf: [ImageInfo, { type: 'null' }] },
    cpu_count: int,
    memory_mb: int,
    disk_size_mb: int,
    with_cube_ca: bool,
    legacy: { ...bool, description: 'Built by the legacy in-process builder and not migrated yet (redo refuses it)' },
    error: nullableString,
    start_cmd: { ...nullableString, description: 'Started in each sandbox (a create waits for ready_cmd); absent when none' },
    ready_cmd: { ...nullableString, description: 'When a sandbox\'s start command is ready' },
    runtime: { type: ['string', 'null'], enum: [...RUNTIME_KINDS, null], description: 'What runs its sandboxes when a create names none; absent: the node\'s default' },
  },
  additionalProperties: false,
} as const;

export const TemplateList = {
  type: 'object',
  required: ['templates'],
  properties: { templates: { type: 'array', items: TemplateInfo } },
  additionalProperties: false,
} as const;

export const JobInfo = {
  type: 'object',
  required: ['job_id', 'template_id', 'kind', 'status', 'phase', 'artifact_id', 'error', 'progress', 'created_at', 'updated_at', 'finished_at'],
  properties: {
    job_id: str,
    template_id: str,
    kind: { type: 'string', enum: JOB_KINDS },
    status: { type: 'string', enum: JOB_STATUSES },
    phase: { anyOf: [{ type: 'string', enum: JOB_PHASES }, { type: 'null' }] },
    artifact_id: nullableString,
    error: nullableString,
    progress: {
      type: 'object',
      required: ['layers', 'message'],
      properties: {
        layers: {
          type: 'array',
          items: {
            type: 'object',
            required: ['digest', 'total_bytes', 'done_bytes'],
            properties: { digest: str, total_bytes: int, done_bytes: int },
            additionalProperties: false,
          },
        },
        message: str,
      },
      additionalProperties: false,
    },
    created_at: timestamp,
    updated_at: timestamp,
    finished_at: { type: ['string', 'null'], format: 'date-time' },
  },
  additionalProperties: false,
} as const;

/** The answer of create and redo (202). */
export const JobAccepted = {
  type: 'object',
  required: ['template_id', 'job_id', 'status'],
  properties: { template_id: str, job_id: str, status: { type: 'string', enum: JOB_STATUSES } },
  additionalProperties: false,
} as const;

/** Names a template for redo and migrate; leaving it out is 400 ErrTemplateIDRequired. */
export const TemplateRef = {
  type: 'object',
  properties: { template_id: { ...nullableString, description: 'A template id or alias' } },
  additionalProperties: false,
} as const;

/** Absent, null or "" clears the alias. */
export const TemplateAlias = {
  type: 'object',
  properties: { alias: nullableString },
  additionalProperties: false,
} as const;

const e2bBuild = {
  type: 'object',
  required: ['buildID', 'status', 'cpuCount', 'memoryMB', 'diskSizeMB', 'createdAt', 'updatedAt'],
  properties: {
    buildID: str,
    status: { type: 'string', enum: E2B_BUILD_STATUSES },
    cpuCount: int,
    memoryMB: int,
    diskSizeMB: int,
    createdAt: timestamp,
    updatedAt: timestamp,
    finishedAt: timestamp,
    envdVersion: { ...str, description: 'The envd its sandboxes run (ready builds)' },
  },
  additionalProperties: false,
} as const;

/** E2B's template as its list answers it. */
export const E2bTemplate = {
  type: 'object',
  required: [
    'templateID', 'buildID', 'aliases', 'names', 'cpuCount', 'memoryMB', 'diskSizeMB', 'public', 'createdAt', 'updatedAt', 'createdBy',
    'lastSpawnedAt', 'spawnCount', 'buildCount', 'buildStatus', 'envdVersion',
  ],
  properties: {
    templateID: str,
    buildID: str,
    aliases: stringList,
    names: stringList,
    cpuCount: int,
    memoryMB: int,
    diskSizeMB: int,
    public: bool,
    createdAt: timestamp,
    updatedAt: timestamp,
    createdBy: { type: 'null', description: 'No teams yet' },
    lastSpawnedAt: { type: ['string', 'null'], format: 'date-time' },
    spawnCount: int,
    buildCount: int,
    buildStatus: { type: 'string', enum: E2B_BUILD_STATUSES },
    envdVersion: str,
  },
  additionalProperties: false,
} as const;

/** E2B's template with its builds (GET /templates/{templateID}). */
export const E2bTemplateDetail = {
  type: 'object',
  required: ['templateID', 'aliases', 'names', 'public', 'createdAt', 'updatedAt', 'lastSpawnedAt', 'spawnCount', 'builds'],
  properties: {
    templateID: str,
    aliases: stringList,
    names: stringList,
    public: bool,
    createdAt: timestamp,
    updatedAt: timestamp,
    lastSpawnedAt: { type: ['string', 'null'], format: 'date-time' },
    spawnCount: int,
    builds: { type: 'array', items: e2bBuild },
  },
  additionalProperties: false,
} as const;

export const E2bTemplateCreated = {
  type: 'object',
  required: ['templateID', 'buildID'],
  properties: { templateID: str, buildID: str },
  additionalProperties: false,
} as const;

export const E2bTemplateAlias = {
  type: 'object',
  required: ['templateID', 'public'],
  properties: { templateID: str, public: bool },
  additionalProperties: false,
} as const;

export const E2bBuildStatus = {
  type: 'object',
  required: ['templateID', 'buildID', 'status', 'logs', 'logEntries'],
  properties: {
    templateID: str,
    buildID: str,
    status: { type: 'string', enum: E2B_BUILD_STATUSES },
    logs: stringList,
    logEntries: {
      type: 'array',
      items: {
        type: 'object',
        required: ['timestamp', 'level', 'message'],
        properties: { timestamp, level: { type: 'string', enum: ['debug', 'info', 'warn', 'error'] }, message: str },
        additionalProperties: false,
      },
    },
    reason: {
      type: 'object',
      required: ['message'],
      properties: { message: str, step: str },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
} as const;

// The template builder's shapes (E2B's v2/v3 build routes, tags, logs, file uploads) live in
// builder-route-schemas.ts; exported from here too, where the template routes read them.
export * from './builder-route-schemas.ts';

/** Every named template shape, for the document's `components.schemas`. */
export const TEMPLATE_SCHEMAS = {
  TemplateCreate,
  TemplateInfo,
  TemplateList,
  ImageInfo,
  JobInfo,
  JobAccepted,
  TemplateRef,
  TemplateAlias,
  E2bTemplate,
  E2bTemplateDetail,
  E2bTemplateCreated,
  E2bTemplateAlias,
  E2bBuildStatus,
  E2bBuildRequest,
  E2bBuildRequested,
  E2bBuildStart,
  E2bAssignTags,
  E2bAssignedTags,
  E2bDeleteTags,
  E2bTemplateTag,
  E2bBuildLogs,
  E2bFileUpload,
} as const;
