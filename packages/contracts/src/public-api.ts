/**
 * The public REST API of the gateway as one OpenAPI 3.1 document: the source that the gateway
 * validates requests and serializes answers from (packages/api), that it serves at
 * GET /openapi.json, and that the wire types of our SDK are derived from (public-api-types.ts).
 * docs/api.md describes it for people; docs/compatibility.md says where it follows E2B.
 */
import { ErrorCodes } from '@svc/common/errors';
import { SCHEMAS } from './public-api-schemas.ts';
import { TEMPLATE_SCHEMAS } from './template-route-schemas.ts';
import { METRIC_SCHEMAS } from './metric-route-schemas.ts';
import { LOG_DIRECTIONS, LOG_LEVELS, SANDBOX_LOG_LIMITS } from './sandbox-logs.ts';

const ALL_SCHEMAS = { ...SCHEMAS, ...TEMPLATE_SCHEMAS, ...METRIC_SCHEMAS };
type SchemaName = keyof typeof ALL_SCHEMAS;

const json = <S>(schema: S) => ({ content: { 'application/json': { schema } } });
const ref = <N extends SchemaName>(name: N) => ({ $ref: `#/components/schemas/${name}` as const });
const error = (description: string) => ({ description, ...json(ref('Error')) });
const pathParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string', minLength: 1 } }) as const;
const query = (name: string, schema: object, description: string) => ({ name, in: 'query', required: false, schema, description });
const sandboxId = pathParam('sandboxID');
const nodeId = pathParam('id');

/** The errors every authenticated route can answer, besides its own. */
const common = { 400: error('Bad input: the message names the field'), 401: error('Missing or wrong API key') };
const ofSandbox = { ...common, 404: error('No such sandbox, or it was killed or timed out (the message says which)') };

const sandboxRoute = <E extends object>(summary: string, extra: E) => ({ summary, parameters: [sandboxId], ...extra });
const created = { 201: { description: 'Created', ...json(ref('Sandbox')) }, ...common, 404: error('No such template'), 503: error('No node can take the sandbox now') };
const connectResponses = {
  200: { description: 'It was running', ...json(ref('Sandbox')) },
  201: { description: 'It was paused and is resumed', ...json(ref('Sandbox')) },
  ...ofSandbox,
  409: error('Busy, or refused by admission (retry)'),
};
const svcDeadlineResponses = {
  200: { description: 'The new deadline', ...json(ref('SvcDeadline')) },
  ...common,
  404: error('No such sandbox'),
  410: error('Killed or timed out'),
};
/** The template routes' 400s carry code 130400, their 404s 130404 (docs/api.md). */
const ofTemplate = {
  400: error(`Bad input (code ${ErrorCodes.badRequest}): the message names the field`),
  401: common[401],
  404: error(`No such template (code ${ErrorCodes.templateNotFound})`),
};
const templateId = pathParam('id');
const accepted = { 202: { description: 'The build job is queued', ...json(ref('JobAccepted')) }, ...ofTemplate };
const createTemplate = { summary: 'Create a template from an image (exactly one source)', requestBody: { required: true, ...json(ref('TemplateCreate')) }, responses: accepted };
const jobAnswer = { 200: { description: 'The job', ...json(ref('JobInfo')) }, ...common, 404: error('No such job') };
const e2bTemplateId = pathParam('templateID');

const logLimit = query('limit', { type: 'integer', minimum: 1, maximum: SANDBOX_LOG_LIMITS.maxEntries, default: SANDBOX_LOG_LIMITS.defaultEntries }, 'At most this many entries');

const teamId = pathParam('teamID');
const unixTime = { type: 'integer', minimum: 0, maximum: 999_999_999_999 } as const;
/** Another team's id is a 404 like one that does not exist. */
const ofTeam = { ...common, 404: error('No such team, or not the caller\'s') };

const nodeAnswer = { 200: { description: 'The node', ...json(ref('Node')) }, ...common, 404: error('No such node') };

export const PUBLIC_API = {
  openapi: '3.1.0',
  info: {
    title: 'svc public API',
    version: '0.1.0',
    description: 'E2B-compatible sandbox API (the official e2b SDK works unchanged) with svc extensions. '
      + 'Errors are {code, message}. Authenticate with X-API-Key or Authorization: Bearer.',
  },
  security: [{ apiKey: [] }, { bearer: [] }],
  paths: {
    '/health': { get: { summary: 'Liveness of the gateway', security: [], responses: { 200: { description: 'Up', ...json(ref('Health')) } } } },
    '/openapi.json': { get: { summary: 'This document', security: [], responses: { 200: { description: 'The OpenAPI document', ...json({ type: 'object', additionalProperties: true }) } } } },
    '/docs': { get: { summary: 'This document as a web page', security: [], responses: { 200: { description: 'HTML', content: { 'text/html': { schema: { type: 'string' } } } } } } },
    '/metrics': {
      get: {
        summary: 'The Prometheus metrics of the gateway\'s process (in svc up, of the whole platform), for the admin API key (docs/observability.md)',
        responses: { 200: { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } }, 401: error('Missing or wrong API key'), 403: error('A team\'s key: the metrics are the operator\'s') },
      },
    },
    '/sandboxes': {
      post: { summary: 'Create a sandbox', requestBody: { required: true, ...json(ref('NewSandbox')) }, responses: created },
      get: {
        summary: 'Running sandboxes (all pages)',
        parameters: [query('metadata', { type: 'string' }, 'URL-encoded k=v pairs joined by &')],
        responses: { 200: { description: 'Sandboxes', ...json({ type: 'array', items: ref('ListedSandbox') }) }, ...common },
      },
    },
    '/v2/sandboxes': {
      post: { summary: 'Create a sandbox', requestBody: { required: true, ...json(ref('NewSandbox')) }, responses: created },
      get: {
        summary: 'List sandboxes, a page at a time',
        parameters: [
          query('metadata', { type: 'string' }, 'URL-encoded k=v pairs joined by &'),
          query('state', { type: 'array', items: { type: 'string', pattern: '^(running|paused)(,(running|paused))*$' } }, 'running, paused: repeated or comma-separated'),
          query('template', { type: 'string' }, 'A template id or alias'),
          query('limit', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }, 'Page size'),
          query('nextToken', { type: 'string' }, 'The X-Next-Token of the previous page'),
          query('order', { type: 'string', enum: ['asc', 'desc'], default: 'desc' }, 'By start time'),
          query('startedAfter', { type: 'string', format: 'date-time' }, 'Started at or after'),
          query('startedBefore', { type: 'string', format: 'date-time' }, 'Started at or before'),
        ],
        responses: {
          200: {
            description: 'A page of sandboxes',
            headers: {
              'X-Next-Token': { schema: { type: 'string' }, description: 'Present when another sandbox passes the filters' },
              'X-Total-Running': { schema: { type: 'integer' }, description: 'Running sandboxes, filters aside' },
            },
            ...json({ type: 'array', items: ref('ListedSandbox') }),
          },
          ...common,
        },
      },
    },
    '/sandboxes/{sandboxID}': {
      get: sandboxRoute('A sandbox', { responses: { 200: { description: 'The sandbox', ...json(ref('SandboxDetail')) }, ...ofSandbox } }),
      delete: sandboxRoute('Kill a sandbox (returns after cleanup)', { responses: { 204: { description: 'Killed' }, ...ofSandbox, 503: error('Pausing or locked: retry after Retry-After') } }),
    },
    '/sandboxes/{sandboxID}/pause': { post: sandboxRoute('Pause a sandbox', { requestBody: json(ref('PauseRequest')), responses: { 204: { description: 'Paused' }, ...ofSandbox, 409: error('Already paused') } }) },
    '/sandboxes/{sandboxID}/resume': {
      post: sandboxRoute('Resume a paused sandbox (deprecated; use connect)', {
        requestBody: json(ref('TimeoutRequest')),
        responses: { 201: { description: 'Resumed', ...json(ref('Sandbox')) }, ...ofSandbox, 409: error('Not paused, busy, or refused by admission') },
      }),
    },
    '/sandboxes/{sandboxID}/connect': { post: sandboxRoute('Connect: resume when paused, extend the timeout', { requestBody: json(ref('TimeoutRequest')), responses: connectResponses }) },
    '/v2/sandboxes/{sandboxID}/connect': { post: sandboxRoute('Connect: resume when paused, extend the timeout', { requestBody: json(ref('TimeoutRequest')), responses: connectResponses }) },
    '/sandboxes/{sandboxID}/timeout': {
      post: sandboxRoute('Set the idle timeout from now', { requestBody: { required: true, ...json(ref('SetTimeout')) }, responses: { 204: { description: 'Set' }, ...ofSandbox } }),
    },
    '/sandboxes/{sandboxID}/refreshes': {
      post: sandboxRoute('Keep the sandbox alive a while longer', { requestBody: json(ref('Refresh')), responses: { 204: { description: 'Refreshed' }, ...ofSandbox } }),
    },
    '/sandboxes/{sandboxID}/network': {
      put: sandboxRoute('Replace a running sandbox\'s egress configuration', {
        requestBody: { required: true, ...json(ref('NetworkUpdate')) },
        responses: { 204: { description: 'Replaced' }, ...ofSandbox, 409: error('Not running') },
      }),
    },
    '/sandboxes/{sandboxID}/metrics': {
      get: {
        summary: 'Metrics of the sandbox',
        parameters: [sandboxId, query('start', { type: 'integer', minimum: 0 }, 'Unix seconds'), query('end', { type: 'integer', minimum: 0 }, 'Unix seconds')],
        responses: { 200: { description: 'Samples in the range', ...json({ type: 'array', items: ref('SandboxMetric') }) }, ...ofSandbox },
      },
    },
    '/sandboxes/metrics': {
      get: {
        summary: 'The newest 5 s sample of each sandbox named (the caller team\'s; one without a sample yet is left out)',
        parameters: [{ name: 'sandbox_ids', in: 'query', required: true, schema: { type: 'array', items: { type: 'string' }, minItems: 1 }, description: 'Sandbox ids, comma-separated or repeated (at most 100)' }],
        responses: { 200: { description: 'By sandbox id', ...json(ref('SandboxesWithMetrics')) }, ...common },
      },
    },
    '/teams/{teamID}/metrics': {
      get: {
        summary: 'A team\'s concurrent sandboxes and start rate per 5 s interval (default: the last hour)',
        parameters: [teamId, query('start', unixTime, 'Unix seconds'), query('end', unixTime, 'Unix seconds')],
        responses: { 200: { description: 'The intervals in which the team ran or started sandboxes', ...json({ type: 'array', items: ref('TeamMetric') }) }, ...ofTeam },
      },
    },
    '/teams/{teamID}/metrics/max': {
      get: {
        summary: 'The largest value of a team metric in the range',
        parameters: [teamId, { name: 'metric', in: 'query', required: true, schema: { type: 'string', enum: ['concurrent_sandboxes', 'sandbox_start_rate'] } }, query('start', unixTime, 'Unix seconds'), query('end', unixTime, 'Unix seconds')],
        responses: { 200: { description: 'The interval with the most (value 0 when none ran)', ...json(ref('MaxTeamMetric')) }, ...ofTeam },
      },
    },
    '/sandboxes/{sandboxID}/logs': {
      get: {
        summary: 'The sandbox\'s own log, oldest first (deprecated by E2B; use /v2)',
        parameters: [sandboxId, query('start', { type: 'integer', minimum: 0 }, 'Milliseconds since the epoch: entries at or after it'), logLimit],
        responses: { 200: { description: 'Each entry as a JSON line and as a structured entry', ...json(ref('SandboxLogs')) }, ...ofSandbox },
      },
    },
    '/v2/sandboxes/{sandboxID}/logs': {
      get: {
        summary: 'The sandbox\'s own log: envd\'s lines and its boots',
        parameters: [
          sandboxId,
          query('cursor', { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER }, 'Milliseconds since the epoch: forward, entries at or after it; backward, at or before it (default now)'),
          logLimit,
          query('direction', { type: 'string', enum: LOG_DIRECTIONS, default: 'forward' }, 'forward: oldest first; backward: newest first'),
          query('level', { type: 'string', enum: LOG_LEVELS }, 'The lowest level answered'),
          query('search', { type: 'string', maxLength: SANDBOX_LOG_LIMITS.searchMaxChars }, 'A case-sensitive part of the message'),
        ],
        responses: { 200: { description: 'The entries', ...json(ref('SandboxLogsV2Response')) }, ...ofSandbox },
      },
    },
    '/sandboxes/{sandboxID}/snapshots': {
      post: sandboxRoute('Snapshot the sandbox\'s files (it is paused for the capture and runs on)', {
        requestBody: json(ref('SnapshotRequest')),
        responses: { 201: { description: 'The snapshot', ...json(ref('SnapshotInfo')) }, ...ofSandbox, 409: error('Paused (connect first), or busy'), 507: error('Not enough space on its node for the capture') },
      }),
    },
    '/sandboxes/{sandboxID}/fork': {
      post: sandboxRoute('Start sandboxes from one capture of this one', {
        requestBody: json(ref('ForkRequest')),
        responses: { 201: { description: 'One outcome per fork', ...json({ type: 'array', items: ref('ForkResult') }) }, ...ofSandbox, 409: error('Paused (connect first), or busy') },
      }),
    },
    '/snapshots': {
      get: {
        summary: 'Snapshots, newest first, a page at a time',
        parameters: [
          query('sandboxID', { type: 'string' }, 'Taken of this sandbox'),
          query('name', { type: 'string' }, 'A snapshot id or name'),
          query('limit', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }, 'Page size'),
          query('nextToken', { type: 'string' }, 'The X-Next-Token of the previous page'),
        ],
        responses: {
          200: {
            description: 'A page of snapshots',
            headers: { 'X-Next-Token': { schema: { type: 'string' }, description: 'Present when there are more' } },
            ...json({ type: 'array', items: ref('SnapshotInfo') }),
          },
          ...common,
        },
      },
    },
    '/svc/sandbox/timeout': { post: { summary: 'Set the idle timeout (svc extension)', requestBody: { required: true, ...json(ref('SvcSetTimeout')) }, responses: svcDeadlineResponses } },
    '/svc/sandbox/refresh': { post: { summary: 'Refresh the idle deadline (svc extension)', requestBody: { required: true, ...json(ref('SvcRefresh')) }, responses: svcDeadlineResponses } },
    '/svc/template': {
      post: createTemplate,
      get: { summary: 'Templates', responses: { 200: { description: 'Every template', ...json(ref('TemplateList')) }, ...common } },
    },
    '/svc/template/from-image': {
      post: { ...createTemplate, summary: 'Create a template (the same as POST /svc/template)' },
      get: { summary: 'A build job', parameters: [query('job_id', { type: 'string', minLength: 1 }, 'The job (required)')], responses: jobAnswer },
    },
    '/svc/template/build/{jobId}/status': { get: { summary: 'A build job', parameters: [pathParam('jobId')], responses: jobAnswer } },
    '/svc/template/redo': {
      post: { summary: 'Redistribute the artifact, or rebuild from the recorded source', requestBody: json(ref('TemplateRef')), responses: accepted },
    },
    '/svc/template/migrate': {
      post: {
        summary: 'Move a legacy artifact into the template center\'s store',
        requestBody: json(ref('TemplateRef')),
        responses: { 200: { description: 'The template', ...json(ref('TemplateInfo')) }, ...ofTemplate },
      },
    },
    '/svc/template/artifact/download': {
      get: {
        summary: 'An artifact (node agents; HEAD too): the file, or a redirect to its presigned URL',
        parameters: [query('artifact_id', { type: 'string', minLength: 1 }, 'The artifact (required)')],
        responses: {
          200: { description: 'The artifact', content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
          302: { description: 'Its presigned URL' },
          ...common,
          404: error('No such artifact, or not READY'),
        },
      },
    },
    '/svc/template/{id}': {
      get: { summary: 'A template, by id or alias', parameters: [templateId], responses: { 200: { description: 'The template', ...json(ref('TemplateInfo')) }, ...ofTemplate } },
      delete: { summary: 'Delete a template (its running sandboxes keep running)', parameters: [templateId], responses: { 204: { description: 'Deleted' }, ...ofTemplate } },
    },
    '/svc/template/{id}/alias': {
      put: {
        summary: 'Set or clear the alias',
        parameters: [templateId],
        requestBody: json(ref('TemplateAlias')),
        responses: { 200: { description: 'The template', ...json(ref('TemplateInfo')) }, ...ofTemplate },
      },
    },
    '/templates': {
      post: { ...createTemplate, summary: 'Create a template (E2B path, svc body)', responses: { 202: { description: 'Queued', ...json(ref('E2bTemplateCreated')) }, ...ofTemplate } },
      get: { summary: 'Templates (E2B shape)', responses: { 200: { description: 'Every template', ...json({ type: 'array', items: ref('E2bTemplate') }) }, ...common } },
    },
    '/templates/aliases/{alias}': {
      get: { summary: 'The template of an alias', parameters: [pathParam('alias')], responses: { 200: { description: 'Its template', ...json(ref('E2bTemplateAlias')) }, ...ofTemplate } },
    },
    '/templates/{templateID}': {
      get: { summary: 'A template with its builds (E2B shape)', parameters: [e2bTemplateId], responses: { 200: { description: 'The template', ...json(ref('E2bTemplateDetail')) }, ...ofTemplate } },
      delete: { summary: 'Delete a template, or a snapshot (E2B deletes snapshots here)', parameters: [e2bTemplateId], responses: { 204: { description: 'Deleted' }, ...ofTemplate, 409: error('A template that snapshots start from (they are named), or a snapshot a create is reading (code 130409 / 409)') } },
    },
    '/templates/{templateID}/builds/{buildID}/logs': {
      get: {
        summary: 'A builder build\'s log entries by time (E2B\'s build logs)',
        parameters: [
          e2bTemplateId, pathParam('buildID'),
          query('cursor', { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER }, 'Milliseconds since the epoch: forward from it, or backward from it'),
          query('direction', { type: 'string', enum: ['forward', 'backward'] }, 'forward (default): oldest first; backward: newest first'),
          query('level', { type: 'string', enum: ['debug', 'info', 'warn', 'error'] }, 'The lowest level answered'),
          query('limit', { type: 'integer', minimum: 1, maximum: 1000 }, 'At most this many (default 100)'),
          query('source', { type: 'string', enum: ['temporary', 'persistent'] }, 'Accepted and ignored: svc keeps one log'),
        ],
        responses: { 200: { description: 'The entries', ...json(ref('E2bBuildLogs')) }, ...ofTemplate },
      },
    },
    '/templates/{templateID}/files/{hash}': {
      get: {
        summary: 'Whether a build\'s context files (a `copy` step\'s files hash) are stored, and where to upload them when not (E2B\'s template builder)',
        parameters: [e2bTemplateId, { name: 'hash', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9a-f]{64}$' }, description: 'The files hash the SDK computed' }],
        responses: { 201: { description: 'Present, or the signed upload URL', ...json(ref('E2bFileUpload')) }, ...ofTemplate },
      },
    },
    '/templates/files/{hash}': {
      put: {
        summary: 'Upload a build\'s context files (a tar, gzipped or not) to the signed URL the route above gave; no API key',
        security: [],
        parameters: [
          { name: 'hash', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9a-f]{64}$' } },
          query('team', { type: 'string' }, 'From the signed URL: the team whose files these are'), query('expires', { type: 'string' }, 'From the signed URL'), query('signature', { type: 'string' }, 'From the signed URL'),
        ],
        requestBody: { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
        responses: {
          200: { description: 'Stored', ...json({ type: 'object', properties: { hash: { type: 'string' }, sizeBytes: { type: 'integer' } } }) },
          400: error('No content-length'), 401: error('No signature, a wrong one, or an expired URL'), 507: error('The store lacks the room'),
        },
      },
    },
    '/templates/tags': {
      post: {
        summary: 'Give the build a `name:tag` (or `name`: the current build) names these tags too (E2B\'s assignTags)',
        requestBody: { required: true, ...json(ref('E2bAssignTags')) },
        responses: { 201: { description: 'The build and the tags given', ...json(ref('E2bAssignedTags')) }, ...ofTemplate },
      },
      delete: {
        summary: 'Remove tags of a template (E2B\'s removeTags); `default` stays',
        requestBody: { required: true, ...json(ref('E2bDeleteTags')) },
        responses: { 204: { description: 'Removed' }, ...ofTemplate },
      },
    },
    '/templates/{templateID}/tags': {
      get: { summary: 'A template\'s tags and the builds they name', parameters: [e2bTemplateId], responses: { 200: { description: 'Its tags', ...json({ type: 'array', items: ref('E2bTemplateTag') }) }, ...ofTemplate } },
    },
    '/v3/templates': {
      post: {
        summary: 'Request a build of a template by name[:tag] (E2B\'s template builder); the same name again is a new build of that template, and fails its requests not started yet for the same tags (E2B\'s "superseded")',
        requestBody: { required: true, ...json(ref('E2bBuildRequest')) },
        responses: { 202: { description: 'The template and its build, waiting for its steps', ...json(ref('E2bBuildRequested')) }, ...ofTemplate, 429: error('The team has 20 builds requested and not started') },
      },
    },
    '/v2/templates/{templateID}/builds/{buildID}': {
      post: {
        summary: 'Start a requested build: its base, steps, start and ready commands (E2B\'s template builder)',
        parameters: [e2bTemplateId, pathParam('buildID')],
        requestBody: { required: true, ...json(ref('E2bBuildStart')) },
        responses: { 202: { description: 'Building' }, ...ofTemplate, 409: error('The build was started already, or ended before its start (superseded by a newer request, or not started within a day)') },
      },
    },
    '/templates/{templateID}/builds/{buildID}/status': {
      get: {
        summary: 'A build\'s status (E2B shape)',
        parameters: [e2bTemplateId, pathParam('buildID'), query('logsOffset', { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER }, 'Log entries already seen'), query('limit', { type: 'integer', minimum: 0, maximum: 100 }, 'At most this many log entries (default 100)'), query('level', { type: 'string', enum: ['debug', 'info', 'warn', 'error'] }, 'The lowest level answered')],
        responses: { 200: { description: 'The build', ...json(ref('E2bBuildStatus')) }, ...ofTemplate },
      },
    },
    '/nodes': { get: { summary: 'Nodes', responses: { 200: { description: 'Nodes', ...json({ type: 'array', items: ref('Node') }) }, ...common } } },
    '/nodes/{id}': { get: { summary: 'A node', parameters: [nodeId], responses: nodeAnswer } },
    '/nodes/{id}/labels': {
      post: { summary: 'Add admin labels (at most 64 a node)', parameters: [nodeId], requestBody: { required: true, ...json(ref('NodeLabels')) }, responses: nodeAnswer },
      delete: { summary: 'Remove admin labels', parameters: [nodeId], requestBody: { required: true, ...json(ref('NodeLabelNames')) }, responses: nodeAnswer },
    },
    '/nodes/{id}/drain': {
      post: { summary: 'Drain a node: it takes no new sandboxes, its running ones move to other nodes and its paused ones are stored to resume elsewhere (docs/cluster.md). Answers at once; the drain goes on in the background, and a drain under way is answered, not started twice', parameters: [nodeId], responses: { 202: { description: 'The drain, just started or under way', ...json(ref('NodeDrain')) }, ...common, 404: error('No such node'), 503: error('The master is stopping') } },
      get: { summary: 'The latest drain of a node, under way or ended', parameters: [nodeId], responses: { 200: { description: 'The drain', ...json(ref('NodeDrain')) }, ...common, 404: error('No such node, or none drained in the last 7 days') } },
      delete: { summary: 'Undrain a node: it takes new sandboxes again', parameters: [nodeId], responses: nodeAnswer },
    },
  },
  components: {
    securitySchemes: {
      apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
      bearer: { type: 'http', scheme: 'bearer' },
    },
    schemas: ALL_SCHEMAS,
  },
} as const;

export type PublicPath = keyof typeof PUBLIC_API.paths;

/** The public paths the gateway forwards to the master as they are: the template routes, E2B's builder's among them. */
export const MASTER_TEMPLATE_PREFIXES = ['/svc/template', '/templates', '/v2/templates', '/v3/templates'] as const;

/**
 * Where the SDK PUTs a build's context files (E2B's COPY) with the signed URL the master gave:
 * `PUT /templates/files/{hash}?team=&expires=&signature=`. The gateway asks no API key there (the
 * signature is the credential, checked by the master) and streams the body through.
 */
export const CONTEXT_FILES_UPLOAD_PATH = '/templates/files';

export function isContextFilesHash(hash: string): boolean {
  return /^[0-9a-f]{64}$/.test(hash);
}

/** Whether a request is a context-files upload (see CONTEXT_FILES_UPLOAD_PATH). */
export function isContextFilesUpload(method: string, path: string): boolean {
  return method === 'PUT' && path.startsWith(`${CONTEXT_FILES_UPLOAD_PATH}/`) && isContextFilesHash(path.slice(CONTEXT_FILES_UPLOAD_PATH.length + 1));
}

/** Whether a public path is one of the master's template routes (MASTER_TEMPLATE_PREFIXES). */
export function isMasterTemplatePath(path: string): boolean {
  return MASTER_TEMPLATE_PREFIXES.some((p) => path === p || path.startsWith(`${p}/`));
}
