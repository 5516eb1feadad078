/**
 * Every HTTP route of a running `svc up`, from the route registrations of each component
 * (packages/<c>/src/routes.ts, index.ts, admin-server.ts, lifecycle.ts, template-center.ts,
 * artifact-routes.ts, envd's server.ts and its Connect services). Base bodies are typed by the
 * components' wire contracts, so a field added there shows up here as a type error.
 */
import { create, toJson, type DescMessage, type MessageInitShape } from '@bufbuild/protobuf';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import type { CreateSandboxInput, ListSandboxesQuery } from '@svc/contracts/master';
import type { ActivityReport, LifecycleReason, NodeHeartbeat, RegisterNode } from '@svc/contracts/master-internal';
import type { CreateSandboxOnNode, EnsureArtifact } from '@svc/contracts/node-agent';
import type { ProxyAnnouncement } from '@svc/contracts/lifecycle';
import type { BuildRequest, JobStatusReport } from '@svc/contracts/template-center';
import type { WireNewSandbox, WireTemplateCreate } from '../../../packages/sdk/src/wire.ts';
import { Filesystem } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { Process, Signal } from '@svc/contracts/envd/process/process_pb';
import type { RouteSpec } from './spec.ts';
import { MB, type Json } from './values.ts';

/** What the fuzzer may use for real: ids and secrets of the platform under test. */
export interface Known {
  apiKey: string;
  callbackToken: string;
  adminToken: string;
  /** node_agent.token: every node agent route but /health and /metrics. */
  nodeToken: string;
  /** cluster_token: every master and lifecycle route but their probes. */
  clusterToken: string;
  /** Sandbox domain, e.g. localhost:13002. */
  domain: string;
  nodeId: string;
  /** A running secure sandbox (envd wants X-Access-Token). */
  running: string;
  envdToken: string;
  /** A running sandbox with allow_public_traffic=false. */
  private: string;
  trafficToken: string;
  /** Created, then killed. */
  killed: string;
}

export const MISSING_TEMPLATE = 'fuzz-no-such-template';
/** Nothing listens there (and fetch does not refuse the port, as it does 1-1023's well-known ones). */
const NOWHERE = 'http://127.0.0.1:65534/fuzz';
const HEX64 = 'ab'.repeat(32);

const json = <T>(v: T): Json => v as unknown as Json;

export function routeCatalog(k: Known): RouteSpec[] {
  return [...apiRoutes(k), ...masterRoutes(k), ...nodeAgentRoutes(k), ...proxyAdminRoutes(k), ...lifecycleRoutes(k), ...templateCenterRoutes(), ...envdRoutes()];
}

// ------------------------------------------------------------------ API gateway (public REST)

function apiRoutes(k: Known): RouteSpec[] {
  const newSandbox = {
    templateID: MISSING_TEMPLATE, timeout: 120, metadata: { owner: 'fuzz' }, envVars: { FUZZ: '1' }, secure: false,
    allow_internet_access: true, network: { allowOut: ['10.1.2.3'], denyOut: ['10.1.2.4'], allowPublicTraffic: true, rules: [] },
    lifecycle: { onTimeout: 'kill', autoResume: false }, volumeMounts: [{ name: 'fuzzvol', path: '/mnt/fuzz', readOnly: false }],
    cpuCount: 1, memoryMB: 256,
    // docs/api.md spells some fields two ways, and E2B says some things its own way; all are fuzzed.
    allowInternetAccess: true, autoPause: false, autoPauseMemory: true, autoResume: { enabled: false }, env_vars: { B: '2' },
    volume_mounts: [{ name: 'fuzzvol2', path: '/mnt/fuzz2', read_only: true }],
    iam: { tokens: { aws: { audience: 'sts.amazonaws.com', tokenType: 'JWT-SVID' } } }, runtime: 'gvisor', nodeSelector: {},
    mcp: { filesystem: { paths: ['/home/user'] } },
  } satisfies Required<WireNewSandbox>;
  const createBody = json(newSandbox);
  const live = { patch: { templateID: 'base', volumeMounts: [], timeout: 120 }, cases: 3 };
  const templateCreate = json({
    image: '127.0.0.1:1/fuzz/none:latest', alias: 'fuzz-alias', registry_auth: { username: 'u', password: 'p' }, insecure_registry: true,
    platform: 'linux/amd64', with_svc_ca: false, cpu_count: 1, memory_mb: 256, disk_size_mb: 512, runtime: 'gvisor',
  } satisfies Omit<WireTemplateCreate, 'oci_layout' | 'docker_archive' | 'rootfs_tar'>);
  const sb = { sandboxID: 'sandbox' } as const;
  const api = (method: string, path: string, extra: Partial<RouteSpec> = {}): RouteSpec => ({ component: 'api', method, path, auth: 'apiKey', bodyLimit: MB, ...extra });
  return [
    api('GET', '/health', { auth: 'none' }),
    api('GET', '/openapi.json', { auth: 'none' }),
    api('GET', '/docs', { auth: 'none' }),
    api('POST', '/sandboxes', { body: createBody, live, random: 12 }),
    api('POST', '/v2/sandboxes', { body: createBody, live, random: 12 }),
    api('GET', '/sandboxes', { query: { metadata: 'owner=fuzz' } }),
    api('GET', '/v2/sandboxes', { query: { metadata: 'owner=fuzz', state: 'running,paused', limit: '10', nextToken: 'abc', template: 'base', order: 'asc', startedAfter: '2026-01-01T00:00:00Z', startedBefore: '2099-01-01T00:00:00Z' } }),
    api('GET', '/sandboxes/:sandboxID', { params: sb }),
    api('GET', '/sandboxes/:sandboxID/metrics', { params: sb, query: { start: '0', end: '9999999999' } }),
    api('GET', '/sandboxes/:sandboxID/logs', { params: sb, query: { start: '0', limit: '10' } }),
    api('GET', '/v2/sandboxes/:sandboxID/logs', { params: sb, query: { cursor: '0', limit: '10', direction: 'backward', level: 'info', search: 'envd' } }),
    api('PUT', '/sandboxes/:sandboxID/network', { params: sb, body: { allow_internet_access: true, allowOut: [], denyOut: ['10.9.0.0/16'] } }),
    api('POST', '/sandboxes/:sandboxID/timeout', { params: sb, body: { timeout: 300 } }),
    api('POST', '/sandboxes/:sandboxID/refreshes', { params: sb, body: { duration: 60 } }),
    api('POST', '/sandboxes/:sandboxID/pause', { params: sb }),
    api('POST', '/sandboxes/:sandboxID/resume', { params: sb, body: { timeout: 300 } }),
    api('POST', '/sandboxes/:sandboxID/connect', { params: sb, body: { timeout: 300 } }),
    api('POST', '/v2/sandboxes/:sandboxID/connect', { params: sb, body: { timeout: 300 } }),
    api('DELETE', '/sandboxes/:sandboxID', { params: { sandboxID: 'deadSandbox' } }),
    api('POST', '/svc/sandbox/timeout', { body: { sandbox_id: k.running, timeout: 300 } }),
    api('POST', '/svc/sandbox/refresh', { body: { sandbox_id: k.running, duration: 60 } }),
    api('GET', '/nodes'),
    api('GET', '/nodes/:id', { params: { id: 'node' } }),
    api('POST', '/nodes/:id/labels', { params: { id: 'node' }, body: { labels: { 'fuzz.example.com/tier': 'a' } } }),
    api('DELETE', '/nodes/:id/labels', { params: { id: 'node' }, body: { names: ['fuzz.example.com/tier'] } }),
    // A missing node only: draining the platform's one node would pause its sandboxes mid-fuzz.
    api('POST', '/nodes/:id/drain', { params: { id: 'bogus' } }),
    api('DELETE', '/nodes/:id/drain', { params: { id: 'bogus' } }),
    // template routes: the gateway forwards them to the master
    api('POST', '/svc/template', { body: templateCreate }),
    api('POST', '/svc/template/from-image', { body: templateCreate }),
    api('GET', '/svc/template'),
    api('GET', '/svc/template/from-image', { query: { job_id: 'job-fuzz' } }),
    api('GET', '/svc/template/build/:jobId/status', { params: { jobId: 'bogus' } }),
    api('POST', '/svc/template/redo', { body: { template_id: 'tpl-fuzz' } }),
    api('POST', '/svc/template/migrate', { body: { template_id: 'tpl-fuzz' } }),
    api('GET', '/svc/template/:id', { params: { id: 'bogus' } }),
    api('DELETE', '/svc/template/:id', { params: { id: 'bogus' } }),
    api('PUT', '/svc/template/:id/alias', { params: { id: 'bogus' }, body: { alias: 'fuzz-alias-2' } }),
    api('GET', '/svc/template/artifact/download', { query: { artifact_id: 'art-fuzz' } }),
    api('HEAD', '/svc/template/artifact/download', { query: { artifact_id: 'art-fuzz' } }),
    api('POST', '/templates', { body: templateCreate }),
    api('GET', '/templates'),
    api('GET', '/templates/aliases/:alias', { params: { alias: 'bogus' } }),
    api('GET', '/templates/:id', { params: { id: 'bogus' } }),
    api('DELETE', '/templates/:id', { params: { id: 'bogus' } }),
    api('GET', '/templates/:id/builds/:buildId/status', { params: { id: 'bogus', buildId: 'bogus' } }),
    api('POST', '/v3/templates', { body: json({ name: 'fuzz-built:v1', cpuCount: 1, memoryMB: 256 }) }),
    api('GET', '/templates/:id/builds/:buildId/logs', { params: { id: 'bogus', buildId: 'bogus' } }),
    api('POST', '/templates/tags', { body: json({ target: 'bogus:v1', tags: ['prod'] }) }),
    api('DELETE', '/templates/tags', { body: json({ name: 'bogus', tags: ['prod'] }) }),
    api('GET', '/templates/:id/tags', { params: { id: 'bogus' } }),
    api('POST', '/v2/templates/:id/builds/:buildId', { params: { id: 'bogus', buildId: 'bogus' }, body: json({ fromTemplate: 'base', steps: [{ type: 'RUN', args: ['true'] }] }) }),
    // teams, keys, the vault, workload identity (docs/security.md); ids are never real ones
    api('GET', '/teams'),
    api('GET', '/api-keys'),
    api('POST', '/api-keys', { body: { name: 'fuzz' } }),
    api('PATCH', '/api-keys/:id', { params: { id: 'bogus' }, body: { name: 'fuzz-2' } }),
    api('DELETE', '/api-keys/:id', { params: { id: 'bogus' } }),
    api('POST', '/admin/teams/:teamID/api-keys', { params: { teamID: 'bogus' }, body: { name: 'fuzz' } }),
    api('DELETE', '/admin/teams/:teamID/api-keys/:apiKeyID', { params: { teamID: 'bogus', apiKeyID: 'bogus' } }),
    api('POST', '/admin/teams/:teamID/sandboxes/kill', { params: { teamID: 'bogus' } }),
    api('GET', '/admin/sandboxes/running-counts'),
    api('POST', '/svc/teams', { body: { name: 'fuzz-team', limits: { maxSandboxes: 5, maxRequestsPerMinute: 0 } } }),
    api('GET', '/svc/teams'),
    api('GET', '/svc/teams/:id', { params: { id: 'bogus' } }),
    api('PATCH', '/svc/teams/:id', { params: { id: 'bogus' }, body: { limits: { maxSandboxes: 1 } } }),
    api('POST', '/svc/teams/:id/keys', { params: { id: 'bogus' }, body: { name: 'fuzz' } }),
    api('GET', '/svc/keys', { query: { teamId: 'fuzz' } }),
    api('DELETE', '/svc/keys/:id', { params: { id: 'bogus' } }),
    api('GET', '/secrets', { query: { limit: '10', nextToken: 'x' } }),
    api('POST', '/secrets', { body: { name: 'fuzz-secret', value: 'fuzz-value', metadata: { a: 'b' } } }),
    api('GET', '/secrets/:id', { params: { id: 'bogus' } }),
    api('POST', '/secrets/:id', { params: { id: 'bogus' }, body: { value: 'v2', metadata: {} } }),
    api('DELETE', '/secrets/:id', { params: { id: 'bogus' } }),
    api('GET', '/.well-known/openid-configuration', { auth: 'none' }),
    api('GET', '/.well-known/jwks.json', { auth: 'none' }),
    api('GET', '/volumes'),
    api('POST', '/volumes', { body: { name: 'fuzzvol', driver: 'local' } }),
    api('GET', '/volumes/:id', { params: { id: 'bogus' } }),
    api('DELETE', '/volumes/:id', { params: { id: 'bogus' } }),
    api('GET', '/volumecontent/:id/dir', { params: { id: 'bogus' }, query: { path: '/', depth: '2' } }),
    api('GET', '/volumecontent/:id/path', { params: { id: 'bogus' }, query: { path: '/a' } }),
    api('DELETE', '/volumecontent/:id/path', { params: { id: 'bogus' }, query: { path: '/a' } }),
    // routes of E2B's platform this version does not serve: a clean 404, never a 5xx
    api('POST', '/svc/sandbox/preview', { body: { sandbox_id: k.running } }),
    api('GET', '/svc/template/compat'),
  ];
}

// ------------------------------------------------------------------ master (gateway-facing and internal)

function masterRoutes(k: Known): RouteSpec[] {
  const createInput = json({
    template: MISSING_TEMPLATE, timeout: 120, onTimeout: 'kill', autoResume: false, metadata: { owner: 'fuzz' }, envVars: { FUZZ: '1' },
    secure: false, allowInternetAccess: true, network: { allowOut: [], denyOut: [], allowPublicTraffic: true, rules: [] },
    volumeMounts: [], cpuCount: 1, memoryMB: 256, pauseMemory: true,
    iam: { tokens: { aws: { audience: 'sts.amazonaws.com', tokenType: 'JWT-SVID' } } }, runtime: 'gvisor', nodeSelector: {},
  } satisfies Required<CreateSandboxInput>);
  const listQuery = { state: 'running', metadata: 'owner=fuzz', template: 'base', limit: '5', nextToken: 'x', order: 'asc', startedAfter: '2026-01-01T00:00:00Z', startedBefore: '2099-01-01T00:00:00Z' } satisfies Record<keyof ListSandboxesQuery, string>;
  const reason = (r: LifecycleReason) => ({ reason: r });
  const register = json({
    nodeId: 'fuzz-node', address: NOWHERE, runtime: 'gvisor', runtimes: ['gvisor'], labels: {}, pauseKinds: ['freeze'], capacity: { cpuCount: 1, memoryMB: 0 },
    pausedResourceReleaseRatio: 0, version: 'fuzz',
  } satisfies RegisterNode);
  const heartbeat = json({ sandboxes: { running: 0, paused: 0 }, usedMemoryMB: 0 } satisfies NodeHeartbeat);
  const jobReport = json({ status: 'FAILED', phase: 'PULLING', error: 'fuzz' } satisfies JobStatusReport);
  const m = (method: string, path: string, extra: Partial<RouteSpec> = {}): RouteSpec => ({ component: 'master', method, path, auth: 'clusterToken', bodyLimit: 4 * MB, ...extra });
  const id = { id: 'sandbox' } as const;
  return [
    m('GET', '/notify/health', { auth: 'none' }),
    m('POST', '/v1/sandboxes', { body: createInput, live: { patch: { template: 'base' }, cases: 1 } }),
    m('GET', '/v1/sandboxes', { query: listQuery }),
    m('GET', '/v1/sandboxes/:id', { params: id }),
    m('DELETE', '/v1/sandboxes/:id', { params: { id: 'deadSandbox' } }),
    m('POST', '/v1/sandboxes/:id/pause', { params: id }),
    m('POST', '/v1/sandboxes/:id/connect', { params: id, body: { timeout: 300 } }),
    m('POST', '/v1/sandboxes/:id/resume', { params: id, body: { timeout: 300 } }),
    m('POST', '/v1/sandboxes/:id/timeout', { params: id, body: { timeout: 300 } }),
    m('POST', '/v1/sandboxes/:id/refresh', { params: id, body: { duration: 60 } }),
    m('GET', '/v1/sandboxes/:id/metrics', { params: id, query: { start: '0', end: '9999999999' } }),
    m('GET', '/v1/sandboxes/:id/logs', { params: id, query: { cursor: '0', limit: '10', direction: 'forward', level: 'debug', search: 'envd' } }),
    m('PUT', '/v1/sandboxes/:id/network', { params: id, body: { allowOut: [], denyOut: ['10.9.0.0/16'] } }),
    m('POST', '/internal/v1/file-urls/route', { body: { path: '/home/user/f', operation: 'read', username: 'user', signature: 'v1_fuzz' } }),
    m('GET', '/internal/v1/sandboxes/:id/route', { params: id }),
    m('POST', '/internal/v1/activity', { body: json({ sandboxIds: [k.running, k.killed] } satisfies ActivityReport) }),
    m('GET', '/internal/v1/lifecycle/due'),
    m('POST', '/internal/v1/sandboxes/:id/pause', { params: id, body: reason('api') }),
    m('POST', '/internal/v1/sandboxes/:id/resume', { params: id, body: reason('auto') }),
    m('POST', '/internal/v1/sandboxes/:id/kill', { params: { id: 'deadSandbox' }, body: reason('timeout') }),
    m('POST', '/v1/teams', { body: { name: 'fuzz-master-team', limits: { maxSandboxes: 1 } } }),
    m('GET', '/v1/teams'),
    m('GET', '/v1/teams/:id', { params: { id: 'bogus' } }),
    m('PATCH', '/v1/teams/:id', { params: { id: 'bogus' }, body: { limits: { maxVcpus: 2 } } }),
    m('POST', '/v1/teams/:id/keys', { params: { id: 'bogus' }, body: { name: 'fuzz' } }),
    m('POST', '/v1/teams/:id/sandboxes/kill', { params: { id: 'bogus' } }),
    m('GET', '/v1/keys', { query: { teamId: 'fuzz' } }),
    m('PATCH', '/v1/keys/:id', { params: { id: 'bogus' }, body: { name: 'x' } }),
    m('DELETE', '/v1/keys/:id', { params: { id: 'bogus' } }),
    m('POST', '/internal/v1/keys/verify', { body: { keyHash: 'a'.repeat(64) } }),
    m('GET', '/v1/admin/running-counts'),
    m('GET', '/secrets'),
    m('POST', '/secrets', { body: { name: 'fuzz-master-secret', value: 'v' } }),
    m('GET', '/secrets/:id', { params: { id: 'bogus' } }),
    m('DELETE', '/secrets/:id', { params: { id: 'bogus' } }),
    m('POST', '/internal/v1/secrets/resolve', { body: { teamId: 'fuzz', names: ['a', 'b'] } }),
    m('GET', '/svc/volume'),
    m('POST', '/svc/volume', { body: { name: 'fuzz-master-vol', driver: 'local' } }),
    m('GET', '/svc/volume/:id', { params: { id: 'bogus' } }),
    m('DELETE', '/svc/volume/:id', { params: { id: 'bogus' } }),
    m('GET', '/v1/volumes/refcounts'),
    m('GET', '/svc/volumecontent/:id/path', { params: { id: 'bogus' }, query: { path: '/' } }),
    m('POST', '/internal/v1/identity/tokens', { body: { sandboxId: k.running, name: 'aws' } }),
    m('GET', '/.well-known/jwks.json'),
    m('GET', '/v1/nodes'),
    m('GET', '/v1/nodes/:id', { params: { id: 'node' } }),
    m('POST', '/v1/nodes/:id/labels', { params: { id: 'node' }, body: { labels: { tier: 'b' } } }),
    m('DELETE', '/v1/nodes/:id/labels', { params: { id: 'node' }, body: { names: ['tier'] } }),
    m('POST', '/v1/nodes/:id/drain', { params: { id: 'bogus' } }),
    m('DELETE', '/v1/nodes/:id/drain', { params: { id: 'bogus' } }),
    m('POST', '/internal/template/jobs/:jobId/status', { params: { jobId: 'bogus' }, body: jobReport, auth: 'callbackToken' }),
    m('GET', '/svc/template/:id', { params: { id: 'bogus' } }),
    m('PATCH', '/svc/template/:id', { params: { id: 'bogus' }, body: {} }),
    // node registration and heartbeats change scheduling: run last (see fuzz.test.ts)
    m('POST', '/internal/v1/nodes/register', { body: register }),
    m('POST', '/internal/v1/nodes/:id/heartbeat', { params: { id: 'node' }, body: heartbeat }),
  ];
}

// ------------------------------------------------------------------ node agent

function nodeAgentRoutes(k: Known): RouteSpec[] {
  const artifact = { sha256: HEX64, sizeBytes: 1, downloadUrl: NOWHERE } satisfies EnsureArtifact;
  const createOnNode = json({
    sandboxId: 'fuzz-node-sandbox', templateId: MISSING_TEMPLATE, artifact: { artifactId: 'art-fuzz', ...artifact }, cpuCount: 1, memoryMB: 128,
    diskSizeMB: 512, envVars: { FUZZ: '1' }, envdAccessToken: 'tok', allowInternetAccess: false, network: { allowOut: [], denyOut: [] },
    metadata: { owner: 'fuzz' }, timeoutMs: 5_000, layer: { layerId: 'layer-fuzz', sha256: HEX64, sizeBytes: 1, downloadUrl: NOWHERE },
    defaultUser: 'user', defaultWorkdir: '/home/user',
    volumes: [{ volumeId: 'vol-fuzz', driver: 'local', privateData: '', path: '/mnt/fuzz', readOnly: true }], runtime: 'gvisor',
  } satisfies Required<CreateSandboxOnNode>);
  const n = (method: string, path: string, extra: Partial<RouteSpec> = {}): RouteSpec => ({ component: 'node-agent', method, path, auth: 'nodeToken', bodyLimit: MB, ...extra });
  void k;
  return [
    n('GET', '/health', { auth: 'none' }),
    n('GET', '/v1/node'),
    n('POST', '/v1/sandboxes', { body: createOnNode }),
    n('GET', '/v1/sandboxes'),
    n('GET', '/v1/sandboxes/:id', { params: { id: 'sandbox' } }),
    n('GET', '/v1/sandboxes/:id/metrics', { params: { id: 'sandbox' } }),
    n('GET', '/v1/sandboxes/:id/logs', { params: { id: 'sandbox' }, query: { cursor: '0', limit: '10', direction: 'backward', level: 'warn', search: 'envd' } }),
    n('PUT', '/v1/sandboxes/:id/network', { params: { id: 'sandbox' }, body: { allowInternetAccess: true, network: { allowOut: [], denyOut: ['10.9.0.0/16'] } } }),
    n('DELETE', '/v1/sandboxes/:id', { params: { id: 'deadSandbox' } }),
    n('POST', '/v1/sandboxes/:id/pause', { params: { id: 'deadSandbox' } }),
    n('POST', '/v1/sandboxes/:id/resume', { params: { id: 'deadSandbox' } }),
    n('POST', '/v1/sandboxes/:id/snapshot', { params: { id: 'deadSandbox' }, body: json({ layerId: 'layer-fuzz' }) }),
    n('POST', '/v1/sandboxes/:id/exec', { params: { id: 'deadSandbox' }, body: json({ command: 'true', user: 'root', cwd: '/', envVars: { A: '1' }, timeoutMs: 1000 }) }),
    n('GET', '/v1/layers'),
    n('DELETE', '/v1/layers/:id', { params: { id: 'bogus' } }),
    n('GET', '/v1/layers/:id/archive', { params: { id: 'bogus' } }),
    n('GET', '/v1/volumes/attachments'),
    n('GET', '/v1/volume-content/:id/path', { params: { id: 'bogus' }, query: { path: '/' } }),
    n('GET', '/v1/artifacts'),
    n('POST', '/v1/artifacts/:id', { params: { id: 'bogus' }, body: json(artifact) }),
    n('DELETE', '/v1/artifacts/:id', { params: { id: 'bogus' } }),
  ];
}

// ------------------------------------------------------------------ data-plane proxy admin, lifecycle, template center

function proxyAdminRoutes(k: Known): RouteSpec[] {
  return [
    { component: 'proxy-admin', method: 'GET', path: '/admin/healthz', auth: 'none' },
    { component: 'proxy-admin', method: 'POST', path: '/admin/backend_cache/delete', auth: 'adminToken', bodyLimit: MB, body: { sandboxIds: [k.running] } },
  ];
}

function lifecycleRoutes(k: Known): RouteSpec[] {
  return [
    { component: 'lifecycle', method: 'GET', path: '/health', auth: 'none' },
    { component: 'lifecycle', method: 'POST', path: '/internal/resume', auth: 'clusterToken', bodyLimit: MB, body: { sandboxId: k.killed } },
    {
      component: 'lifecycle', method: 'POST', path: '/internal/v1/proxies/heartbeat', auth: 'clusterToken', bodyLimit: MB,
      body: json({ proxyId: 'fuzz-proxy', adminUrl: NOWHERE } satisfies ProxyAnnouncement),
    },
  ];
}

function templateCenterRoutes(): RouteSpec[] {
  const build = json({
    jobId: 'job-fuzz', templateId: 'tpl-fuzz', artifactId: 'art-fuzz', specHash: 'fuzz', withSvcCa: false, diskSizeMB: 0,
    source: { kind: 'rootfs-tar', path: '/nonexistent/fuzz.tar' },
  } satisfies BuildRequest);
  const tc = (method: string, path: string, extra: Partial<RouteSpec> = {}): RouteSpec => ({ component: 'template-center', method, path, auth: 'callbackToken', bodyLimit: MB, ...extra });
  return [
    tc('GET', '/health', { auth: 'none' }),
    tc('POST', '/tc/api/v1/build', { body: build }),
    tc('POST', '/tc/api/v1/artifact/delete', { body: { artifactId: 'art-fuzz' } }),
    tc('POST', '/tc/api/v1/artifact/migrate', { body: { artifactId: 'art-fuzz', localPath: '/nonexistent/fuzz.ext4' } }),
    tc('GET', '/tc/api/v1/artifact/:artifactId', { params: { artifactId: 'bogus' } }),
    tc('HEAD', '/tc/api/v1/artifact/:artifactId', { params: { artifactId: 'bogus' } }),
  ];
}

// ------------------------------------------------------------------ envd, through the data-plane proxy

const NO_PID = { selector: { case: 'pid' as const, value: 999_999 } };

/** A base request for every Connect method (a method without one here fails the test run). */
const connectBases: Record<string, unknown> = {
  'filesystem.Filesystem/Stat': { path: '/etc/hostname' },
  'filesystem.Filesystem/MakeDir': { path: '/tmp/fuzz/dir' },
  'filesystem.Filesystem/Move': { source: '/tmp/fuzz/a', destination: '/tmp/fuzz/b' },
  'filesystem.Filesystem/ListDir': { path: '/tmp', depth: 1 },
  'filesystem.Filesystem/Remove': { path: '/tmp/fuzz/none' },
  'filesystem.Filesystem/WatchDir': { path: '/tmp', recursive: false },
  'filesystem.Filesystem/CreateWatcher': { path: '/tmp', recursive: false },
  'filesystem.Filesystem/GetWatcherEvents': { watcherId: 'fuzz-watcher' },
  'filesystem.Filesystem/RemoveWatcher': { watcherId: 'fuzz-watcher' },
  'process.Process/List': {},
  'process.Process/Connect': { process: NO_PID },
  'process.Process/Start': { process: { cmd: '/bin/echo', args: ['fuzz'], envs: { FUZZ: '1' }, cwd: '/tmp' }, stdin: false },
  'process.Process/Update': { process: NO_PID, pty: { size: { cols: 80, rows: 24 } } },
  'process.Process/StreamInput': { event: { case: 'start', value: { process: NO_PID } } },
  'process.Process/SendInput': { process: NO_PID, input: { input: { case: 'stdin', value: new TextEncoder().encode('fuzz') } } },
  'process.Process/SendSignal': { process: NO_PID, signal: Signal.SIGTERM },
  'process.Process/CloseStdin': { process: NO_PID },
};

function connectRoutes(service: GenService<never>): RouteSpec[] {
  return service.methods.map((method) => {
    const path = `${service.typeName}/${method.name}`;
    if (!(path in connectBases)) throw new Error(`fuzz catalog: no base request for ${path}`);
    const schema = method.input as DescMessage;
    const base = toJson(schema, create(schema, connectBases[path] as MessageInitShape<DescMessage>)) as Json;
    const connect = method.methodKind === 'unary' ? 'unary' : method.methodKind === 'client_streaming' ? 'client-stream' : 'server-stream';
    return { component: 'envd', method: 'POST', path: `/${path}`, auth: 'none', body: base, connect } satisfies RouteSpec;
  });
}

function envdRoutes(): RouteSpec[] {
  const e = (method: string, path: string, extra: Partial<RouteSpec> = {}): RouteSpec => ({ component: 'envd', method, path, auth: 'none', ...extra });
  return [
    e('GET', '/health'),
    e('GET', '/envs'),
    e('GET', '/metrics'),
    e('GET', '/files', { query: { path: '/etc/hostname', username: 'user' } }),
    e('HEAD', '/files', { query: { path: '/etc/hostname', username: 'user' } }),
    e('POST', '/files', { query: { path: '/tmp/fuzz/upload.txt', username: 'user' }, upload: true }),
    e('OPTIONS', '/files'),
    ...connectRoutes(Filesystem as unknown as GenService<never>),
    ...connectRoutes(Process as unknown as GenService<never>),
    // last: a successful /init may change envd's access token
    e('POST', '/init', { body: { envVars: { FUZZ: '1' }, defaultUser: 'user', defaultWorkdir: '/tmp', timestamp: new Date(0).toISOString() }, bodyLimit: MB }),
  ];
}
