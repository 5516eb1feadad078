/**
 * The public REST surface of the API gateway as one OpenAPI 3.0 document, served at
 * GET /openapi.json. E2B's paths and shapes that svc serves (docs/compatibility.md), plus svc's
 * `/svc/...` extensions and `/nodes`. A test (openapi.test.ts) keeps it and the registered routes
 * equal, path by path and method by method. It does not yet drive validation or the SDK's types
 * (issue 9's contract work goes on from here).
 */
const json = (schema: object) => ({ content: { 'application/json': { schema } } });
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const error = (description: string) => ({ description, ...json(ref('Error')) });
const sandboxId = { name: 'sandboxID', in: 'path', required: true, schema: { type: 'string', maxLength: 64 } };
const nodeId = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
const query = (name: string, schema: object, description: string) => ({ name, in: 'query', required: false, schema, description });
const timestamp = { type: 'string', format: 'date-time' };
const stringMap = { type: 'object', additionalProperties: { type: 'string' } };
const stringList = { type: 'array', items: { type: 'string' } };

/** The errors every authenticated route can answer, besides its own. */
const common = { 400: error('Bad input: the message names the field'), 401: error('Missing or wrong API key') };
const ofSandbox = { ...common, 404: error('No such sandbox, or it was killed or timed out (the message says which)') };

const sandboxRoute = (summary: string, extra: object) => ({ summary, parameters: [sandboxId], ...extra });

export const OPENAPI = {
  openapi: '3.0.3',
  info: {
    title: 'svc public API',
    version: '0.1.0',
    description: 'E2B-compatible sandbox API (the official e2b SDK works unchanged) with svc extensions. '
      + 'Errors are {code, message}. Authenticate with X-API-Key or Authorization: Bearer.',
  },
  security: [{ apiKey: [] }, { bearer: [] }],
  paths: {
    '/health': { get: { summary: 'Liveness of the gateway', security: [], responses: { 200: { description: 'Up', ...json({ type: 'object', properties: { ok: { type: 'boolean' } } }) } } } },
    '/openapi.json': { get: { summary: 'This document', security: [], responses: { 200: { description: 'The OpenAPI document', ...json({ type: 'object' }) } } } },
    '/sandboxes': {
      post: { summary: 'Create a sandbox', requestBody: { required: true, ...json(ref('NewSandbox')) }, responses: { 201: { description: 'Created', ...json(ref('Sandbox')) }, ...common, 404: error('No such template'), 503: error('No node can take the sandbox now') } },
      get: {
        summary: 'Running sandboxes (all pages)',
        parameters: [query('metadata', { type: 'string' }, 'URL-encoded k=v pairs joined by &')],
        responses: { 200: { description: 'Sandboxes', ...json({ type: 'array', items: ref('ListedSandbox') }) }, ...common },
      },
    },
    '/v2/sandboxes': {
      post: { summary: 'Create a sandbox', requestBody: { required: true, ...json(ref('NewSandbox')) }, responses: { 201: { description: 'Created', ...json(ref('Sandbox')) }, ...common, 404: error('No such template'), 503: error('No node can take the sandbox now') } },
      get: {
        summary: 'List sandboxes, a page at a time',
        parameters: [
          query('metadata', { type: 'string' }, 'URL-encoded k=v pairs joined by &'),
          query('state', { type: 'array', items: { type: 'string', enum: ['running', 'paused'] } }, 'States, repeated or comma-separated'),
          query('template', { type: 'string' }, 'A template id or alias'),
          query('limit', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }, 'Page size'),
          query('nextToken', { type: 'string' }, 'The X-Next-Token of the previous page'),
          query('order', { type: 'string', enum: ['asc', 'desc'], default: 'desc' }, 'By start time'),
          query('startedAfter', timestamp, 'Started at or after'),
          query('startedBefore', timestamp, 'Started at or before'),
        ],
        responses: {
          200: {
            description: 'A page of sandboxes',
            headers: { 'X-Next-Token': { schema: { type: 'string' }, description: 'Present when another sandbox passes the filters' }, 'X-Total-Running': { schema: { type: 'integer' } } },
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
    '/sandboxes/{sandboxID}/pause': { post: sandboxRoute('Pause a sandbox', { responses: { 204: { description: 'Paused' }, ...ofSandbox, 409: error('Already paused') } }) },
    '/sandboxes/{sandboxID}/resume': {
      post: sandboxRoute('Resume a paused sandbox (deprecated; use connect)', {
        requestBody: json(ref('TimeoutRequest')), responses: { 201: { description: 'Resumed', ...json(ref('Sandbox')) }, ...ofSandbox, 409: error('Not paused, busy, or refused by admission') },
      }),
    },
    '/sandboxes/{sandboxID}/connect': { post: sandboxRoute('Connect: resume when paused, extend the timeout', { requestBody: json(ref('TimeoutRequest')), responses: connectResponses() }) },
    '/v2/sandboxes/{sandboxID}/connect': { post: sandboxRoute('Connect: resume when paused, extend the timeout', { requestBody: json(ref('TimeoutRequest')), responses: connectResponses() }) },
    '/sandboxes/{sandboxID}/timeout': { post: sandboxRoute('Set the idle timeout from now', { requestBody: { required: true, ...json(ref('TimeoutRequest')) }, responses: { 204: { description: 'Set' }, ...ofSandbox } }) },
    '/sandboxes/{sandboxID}/refreshes': { post: sandboxRoute('Keep the sandbox alive a while longer', { requestBody: json({ type: 'object', properties: { duration: { type: 'integer' } } }), responses: { 204: { description: 'Refreshed' }, ...ofSandbox } }) },
    '/sandboxes/{sandboxID}/network': {
      put: sandboxRoute('Replace a running sandbox\'s egress configuration', {
        requestBody: { required: true, ...json(ref('NetworkUpdate')) }, responses: { 204: { description: 'Replaced' }, ...ofSandbox, 409: error('Not running') },
      }),
    },
    '/sandboxes/{sandboxID}/metrics': {
      get: sandboxRoute('Metrics of the sandbox', {
        parameters: [sandboxId, query('start', { type: 'integer', minimum: 0 }, 'Unix seconds'), query('end', { type: 'integer', minimum: 0 }, 'Unix seconds')],
        responses: { 200: { description: 'Samples in the range', ...json({ type: 'array', items: ref('SandboxMetric') }) }, ...ofSandbox },
      }),
    },
    '/svc/sandbox/timeout': { post: { summary: 'Set the idle timeout (svc extension)', requestBody: { required: true, ...json({ type: 'object', required: ['sandbox_id', 'timeout'], properties: { sandbox_id: { type: 'string' }, timeout: { type: 'integer' } } }) }, responses: svcTimeoutResponses() } },
    '/svc/sandbox/refresh': { post: { summary: 'Refresh the idle deadline (svc extension)', requestBody: { required: true, ...json({ type: 'object', required: ['sandbox_id'], properties: { sandbox_id: { type: 'string' }, duration: { type: 'integer' } } }) }, responses: svcTimeoutResponses() } },
    '/nodes': { get: { summary: 'Nodes', responses: { 200: { description: 'Nodes', ...json({ type: 'array', items: { type: 'object' } }) }, ...common } } },
    '/nodes/{id}': { get: { summary: 'A node', parameters: [nodeId], responses: { 200: { description: 'The node', ...json({ type: 'object' }) }, ...common, 404: error('No such node') } } },
    '/nodes/{id}/labels': {
      post: { summary: 'Add admin labels (at most 64 a node)', parameters: [nodeId], requestBody: { required: true, ...json({ type: 'object', properties: { labels: stringMap } }) }, responses: { 200: { description: 'The node', ...json({ type: 'object' }) }, ...common, 404: error('No such node') } },
      delete: { summary: 'Remove admin labels', parameters: [nodeId], requestBody: { required: true, ...json({ type: 'object', properties: { names: stringList } }) }, responses: { 200: { description: 'The node', ...json({ type: 'object' }) }, ...common, 404: error('No such node') } },
    },
  },
  'x-forwarded-prefixes': {
    description: 'Passed to the master unchanged; their shapes are in docs/templates.md and docs/api.md.',
    prefixes: ['/svc/template', '/templates'],
  },
  components: {
    securitySchemes: {
      apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
      bearer: { type: 'http', scheme: 'bearer' },
    },
    schemas: {
      Error: { type: 'object', required: ['code', 'message'], properties: { code: { type: 'integer' }, message: { type: 'string' } } },
      NewSandbox: {
        type: 'object', required: ['templateID'],
        properties: {
          templateID: { type: 'string', description: 'A template id or alias' },
          timeout: { type: 'integer', minimum: -1, maximum: 2147483647, description: 'Idle timeout in seconds; -1 never' },
          autoPause: { type: 'boolean' },
          autoResume: { type: 'object', properties: { enabled: { type: 'boolean' } } },
          lifecycle: { type: 'object', properties: { on_timeout: { type: 'string', enum: ['kill', 'pause'] }, auto_resume: { type: 'boolean' } } },
          secure: { type: 'boolean', default: true },
          allow_internet_access: { type: 'boolean' },
          metadata: stringMap, envVars: stringMap,
          network: { type: 'object', properties: { allowOut: stringList, denyOut: stringList, allowPublicTraffic: { type: 'boolean' }, rules: {} } },
          volumeMounts: { type: 'array', items: { type: 'object', required: ['name', 'path'], properties: { name: { type: 'string' }, path: { type: 'string' }, readOnly: { type: 'boolean' } } } },
          cpuCount: { type: 'integer', minimum: 1 }, memoryMB: { type: 'integer', minimum: 64 },
        },
      },
      Sandbox: {
        type: 'object', required: ['sandboxID', 'templateID', 'clientID', 'envdVersion'],
        properties: {
          sandboxID: { type: 'string' }, templateID: { type: 'string' }, alias: { type: 'string' }, clientID: { type: 'string' },
          envdVersion: { type: 'string' }, envdAccessToken: { type: 'string' }, trafficAccessToken: { type: 'string', nullable: true }, domain: { type: 'string' },
        },
      },
      ListedSandbox: {
        type: 'object', required: ['sandboxID', 'templateID', 'clientID', 'startedAt', 'state'],
        properties: {
          sandboxID: { type: 'string' }, templateID: { type: 'string' }, alias: { type: 'string' }, clientID: { type: 'string' },
          startedAt: timestamp, endAt: timestamp, cpuCount: { type: 'integer' }, memoryMB: { type: 'integer' }, diskSizeMB: { type: 'integer' },
          metadata: stringMap, state: { type: 'string', enum: ['running', 'paused'] }, envdVersion: { type: 'string' },
          volumeMounts: { type: 'array', items: { type: 'object' } }, pauseKind: { type: 'string' }, timeout: { type: 'integer' },
        },
      },
      SandboxDetail: {
        allOf: [ref('ListedSandbox'), {
          type: 'object',
          properties: {
            envdAccessToken: { type: 'string' }, domain: { type: 'string' }, allowInternetAccess: { type: 'boolean', nullable: true },
            network: { type: 'object', properties: { allowOut: stringList, denyOut: stringList, allowPublicTraffic: { type: 'boolean' }, rules: {} } },
            lifecycle: { type: 'object', properties: { onTimeout: { type: 'string', enum: ['kill', 'pause'] }, autoResume: { type: 'boolean' } } },
          },
        }],
      },
      TimeoutRequest: { type: 'object', properties: { timeout: { type: 'integer', description: 'Seconds' } } },
      NetworkUpdate: {
        type: 'object', description: 'The whole egress configuration; a field left out is cleared',
        properties: { allow_internet_access: { type: 'boolean' }, allowOut: stringList, denyOut: stringList, rules: {} },
      },
      SandboxMetric: {
        type: 'object',
        properties: {
          timestamp, timestampUnix: { type: 'integer' }, cpuCount: { type: 'integer' }, cpuUsedPct: { type: 'number' }, memUsed: { type: 'integer' },
          memTotal: { type: 'integer' }, memCache: { type: 'integer' }, diskUsed: { type: 'integer' }, diskTotal: { type: 'integer' },
        },
      },
    },
  },
} as const;

function connectResponses() {
  return {
    200: { description: 'It was running', ...json(ref('Sandbox')) },
    201: { description: 'It was paused and is resumed', ...json(ref('Sandbox')) },
    ...ofSandbox,
    409: error('Busy, or refused by admission (retry)'),
  };
}

function svcTimeoutResponses() {
  return {
    200: { description: 'The new deadline', ...json({ type: 'object', properties: { sandbox_id: { type: 'string' }, timeout: { type: 'integer' }, end_at: { type: 'string', nullable: true } } }) },
    ...common,
    404: error('No such sandbox'),
    410: error('Killed or timed out'),
  };
}
