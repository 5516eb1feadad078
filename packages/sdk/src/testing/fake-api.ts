/**
 * A stand-in for the API gateway in SDK and CLI tests: the routes the SDK calls, with an
 * in-memory table. Each route is registered from the public OpenAPI document, as the gateway's
 * are, so its input is checked and its answer shaped by the same schemas; it passes the same
 * contract suite as the gateway (contracts/public-api.contract.ts). Template builds advance one
 * step per status poll so progress display can be exercised. Volumes have no plugins behind them:
 * the drivers are names (`volumeDrivers`), and a volume is in use while a running sandbox mounts it.
 */
import type { FastifyInstance, FastifyReply, HTTPMethods, RouteHandlerMethod } from 'fastify';
import { randomUUID } from 'node:crypto';
import { ErrorCodes, createHttpApp, silentLogger } from '@svc/common';
import { PUBLIC_API, type PublicPath } from '@svc/contracts';
import { documentedRoute } from '@svc/contracts/route-schemas';
import type { JobInfo, JobKind, SourceKind, TemplateInfo } from '@svc/contracts/template-routes';
import type { SandboxLogEntry } from '@svc/contracts/node-agent';
import { e2bLogLine, parseSandboxLogsQuery, pickSandboxLogs } from '@svc/contracts/sandbox-logs';
import { serveFakeEvents, type FakeEvents } from './fake-events.ts';
import { fakeError as err } from './fake-routes.ts';
import { serveFakeNodes, type NodeRow } from './fake-nodes.ts';
import { serveFakeVolumes, type VolumeRow } from './fake-volumes.ts';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

interface SandboxRow {
  sandboxID: string;
  templateID: string;
  alias?: string;
  state: 'running' | 'paused';
  /** While paused: 'filesystem' after a pause with memory false (connect boots it again), else 'freeze'. */
  pauseKind?: 'freeze' | 'filesystem';
  startedAt: string;
  timeout: number;
  metadata: Record<string, string>;
  envdAccessToken: string;
  trafficAccessToken?: string;
  lifecycle: { onTimeout: 'kill' | 'pause'; autoResume: boolean };
  network: Record<string, unknown>;
  allowInternetAccess?: boolean;
  volumeMounts: { name: string; path: string; readOnly?: boolean }[];
}

/** Template and job records in the contract's shapes, as the master answers them. */
type TemplateRow = TemplateInfo;

interface JobRow extends JobInfo {
  /** Index into the fake's build script. */
  step: number;
  fail: boolean;
}

export interface FakeApiOptions {
  /** When set, every request must carry it as X-API-Key or Bearer. */
  apiKey?: string;
  domain?: string;
  envdVersion?: string;
  /** The volume plugins' names, the default first. Default ['local']. */
  volumeDrivers?: string[];
}

export interface FakeApi {
  url: string;
  app: FastifyInstance;
  requests: RecordedRequest[];
  sandboxes: Map<string, SandboxRow>;
  templates: Map<string, TemplateRow>;
  jobs: Map<string, JobRow>;
  nodes: Map<string, NodeRow>;
  volumes: Map<string, VolumeRow>;
  /** Lifecycle events and webhooks (fake-events.ts). */
  events: FakeEvents;
  /** Sandboxes whose next DELETE answers 503 with Retry-After (as while pausing). */
  busyOnce: Set<string>;
  /** The body of the last sandbox create. */
  lastCreate(): Record<string, unknown> | undefined;
  close(): Promise<void>;
}

const BUILD_SCRIPT: Pick<JobRow, 'status' | 'phase'>[] = [
  { status: 'PENDING', phase: null },
  { status: 'RUNNING', phase: 'PULLING' },
  { status: 'RUNNING', phase: 'PULLING' },
  { status: 'RUNNING', phase: 'BUILDING' },
  { status: 'RUNNING', phase: 'UPLOADING' },
  { status: 'RUNNING', phase: 'DISTRIBUTING' },
  { status: 'BUILT', phase: 'DISTRIBUTING' },
];

export async function startFakeApi(opts: FakeApiOptions = {}): Promise<FakeApi> {
  const app = createHttpApp({ logger: silentLogger() });
  const on = (method: HTTPMethods, path: PublicPath, handler: (req: any, reply: FastifyReply) => unknown) =>
    app.route({ ...documentedRoute(method, path), handler: handler as RouteHandlerMethod });
  const requests: RecordedRequest[] = [];
  const sandboxes = new Map<string, SandboxRow>();
  const templates = new Map<string, TemplateRow>();
  const jobs = new Map<string, JobRow>();
  const nodes = new Map<string, NodeRow>();
  const busyOnce = new Set<string>();
  const volumes = new Map<string, VolumeRow>();
  const now = () => new Date().toISOString();
  let creates: Record<string, unknown>[] = [];

  const base: TemplateRow = {
    template_id: 'base', alias: 'base', status: 'ready', source_image_ref: 'debian:bookworm', latest_job_id: 'job-base',
    artifact_id: 'art-base', created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-01T00:00:00.000Z',
    cpu_count: 2, memory_mb: 512, disk_size_mb: 2048, with_cube_ca: true, error: null, source_kind: 'rootfs_tar', image_info: null, legacy: false,
  };
  templates.set(base.template_id, base);
  nodes.set('node-1', {
    nodeId: 'node-1', address: 'http://127.0.0.1:8088', runtime: 'gvisor', status: 'ready',
    usage: { running: 0, paused: 0, usedMemoryMB: 0 }, labels: { zone: 'a' }, version: '0.1.0',
  });

  app.addHook('preHandler', async (req, reply) => {
    requests.push({ method: req.method, url: req.url, headers: req.headers, body: req.body });
    if (!opts.apiKey) return;
    const bearer = String(req.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
    if (req.headers['x-api-key'] !== opts.apiKey && bearer !== opts.apiKey) return err(reply, 401, 'invalid API key');
  });

  const findTemplate = (idOrAlias: string) =>
    templates.get(idOrAlias) ?? [...templates.values()].find((t) => t.alias === idOrAlias);

  const endAt = (s: SandboxRow) => (s.timeout < 0 ? undefined : new Date(Date.parse(s.startedAt) + s.timeout * 1000).toISOString());
  const wireSandbox = (s: SandboxRow) => ({
    sandboxID: s.sandboxID, templateID: s.templateID, alias: s.alias, clientID: 'local',
    envdVersion: opts.envdVersion ?? '0.6.4', envdAccessToken: s.envdAccessToken,
    trafficAccessToken: s.trafficAccessToken ?? null, domain: opts.domain ?? null,
  });
  const detail = (s: SandboxRow) => ({
    sandboxID: s.sandboxID, templateID: s.templateID, alias: s.alias, clientID: 'local', startedAt: s.startedAt,
    ...(endAt(s) ? { endAt: endAt(s) } : {}), cpuCount: 2, memoryMB: 512, diskSizeMB: 2048, metadata: s.metadata,
    state: s.state, envdVersion: opts.envdVersion ?? '0.6.4', envdAccessToken: s.envdAccessToken, domain: opts.domain ?? null,
    lifecycle: s.lifecycle, network: s.network, allowInternetAccess: s.allowInternetAccess ?? true, volumeMounts: s.volumeMounts,
    timeout: s.timeout, ...(s.state === 'paused' ? { pauseKind: s.pauseKind ?? 'freeze' } : {}),
  });

  // ------------------------------------------------------------ sandboxes
  const create = async (req: any, reply: FastifyReply) => {
    const b = (req.body ?? {}) as Record<string, any>;
    creates.push(b);
    const tpl = findTemplate(String(b.templateID ?? ''));
    if (!tpl) return err(reply, 404, `template ${b.templateID} not found`, ErrorCodes.templateNotFound);
    const lifecycle = b.lifecycle ?? {};
    const pauseMemory = lifecycle.keepMemory ?? b.autoPauseMemory;
    if (pauseMemory === false && lifecycle.autoResume) return err(reply, 400, 'autoResume cannot be combined with autoPauseMemory false');
    const row: SandboxRow = {
      sandboxID: `sbx-${randomUUID().slice(0, 8)}`,
      templateID: tpl.template_id,
      alias: tpl.alias ?? undefined,
      state: 'running',
      startedAt: now(),
      timeout: typeof b.timeout === 'number' ? b.timeout : 300,
      metadata: b.metadata ?? {},
      envdAccessToken: `tok-${randomUUID()}`,
      trafficAccessToken: b.network?.allowPublicTraffic === false ? randomUUID() : undefined,
      lifecycle: { onTimeout: lifecycle.onTimeout ?? 'kill', autoResume: lifecycle.autoResume ?? false },
      network: {
        allowOut: b.network?.allowOut ?? [], denyOut: b.network?.denyOut ?? [], allowPublicTraffic: b.network?.allowPublicTraffic ?? true,
        ...(b.network?.maskRequestHost ? { maskRequestHost: b.network.maskRequestHost } : {}),
      },
      allowInternetAccess: b.allow_internet_access,
      volumeMounts: b.volumeMounts ?? [],
    };
    sandboxes.set(row.sandboxID, row);
    return reply.status(201).send(wireSandbox(row));
  };
  on('POST', '/sandboxes', create);
  on('POST', '/v2/sandboxes', create);

  on('GET', '/v2/sandboxes', async (req, reply) => {
    // Read through the document's schema, as the gateway reads it: state is a list, limit a number.
    const q = req.query as { state?: string[]; metadata?: string; nextToken?: string; limit?: number };
    const states = q.state ? q.state.flatMap((x) => x.split(',')) : ['running', 'paused'];
    // decoded as the master does: the pairs, then each key and value
    const meta = Object.fromEntries([...new URLSearchParams(q.metadata ?? '')].map(([k, v]) => [decodeURIComponent(k), decodeURIComponent(v)]));
    let rows = [...sandboxes.values()].filter((s) => states.includes(s.state))
      .filter((s) => Object.entries(meta).every(([k, v]) => s.metadata[k] === v))
      .sort((a, b) => a.sandboxID.localeCompare(b.sandboxID));
    if (q.nextToken) rows = rows.filter((s) => s.sandboxID > q.nextToken!);
    const limit = q.limit ?? 100;
    const page = rows.slice(0, limit);
    if (rows.length > limit) reply.header('x-next-token', page[page.length - 1].sandboxID);
    return page.map(detail);
  });
  on('GET', '/sandboxes', async () => [...sandboxes.values()].map(detail));

  on('GET', '/sandboxes/{sandboxID}', async (req, reply) => {
    const s = sandboxes.get((req.params as { sandboxID: string }).sandboxID);
    return s ? detail(s) : err(reply, 404, 'sandbox not found');
  });
  on('DELETE', '/sandboxes/{sandboxID}', async (req, reply) => {
    const id = (req.params as { sandboxID: string }).sandboxID;
    if (busyOnce.delete(id)) return reply.header('retry-after', '1').status(503).send({ code: 503, message: `sandbox ${id} is pausing` });
    if (!sandboxes.delete(id)) return err(reply, 404, `sandbox ${id} not found`);
    return reply.status(204).send();
  });
  on('POST', '/sandboxes/{sandboxID}/pause', async (req, reply) => {
    const s = sandboxes.get((req.params as { sandboxID: string }).sandboxID);
    if (!s) return err(reply, 404, 'sandbox not found');
    if (s.state === 'paused') return err(reply, 409, 'sandbox is already paused');
    s.state = 'paused';
    s.pauseKind = (req.body as { memory?: boolean } | undefined)?.memory === false ? 'filesystem' : 'freeze';
    return reply.status(204).send();
  });
  const connect = async (req: any, reply: FastifyReply) => {
    const s = sandboxes.get(req.params.sandboxID);
    if (!s) return err(reply, 404, 'sandbox not found');
    const t = req.body?.timeout;
    if (t !== undefined && (t === 0 || t < -1)) return err(reply, 400, 'timeout must be -1 or positive');
    if (t !== undefined) s.timeout = t;
    const resumed = s.state === 'paused';
    s.state = 'running';
    return reply.status(resumed ? 201 : 200).send(wireSandbox(s));
  };
  on('POST', '/sandboxes/{sandboxID}/connect', connect);
  on('POST', '/v2/sandboxes/{sandboxID}/connect', connect);
  on('POST', '/sandboxes/{sandboxID}/resume', async (req, reply) => {
    const s = sandboxes.get((req.params as { sandboxID: string }).sandboxID);
    if (!s) return err(reply, 404, 'sandbox not found');
    if (s.state === 'running') return err(reply, 409, 'sandbox is already running');
    const t = (req.body as { timeout?: number } | undefined)?.timeout;
    if (t !== undefined && t < -1) return err(reply, 400, 'timeout must be -1 or more');
    if (t) s.timeout = t;
    s.state = 'running';
    return reply.status(201).send(wireSandbox(s));
  });
  on('POST', '/sandboxes/{sandboxID}/timeout', async (req, reply) => {
    const s = sandboxes.get((req.params as { sandboxID: string }).sandboxID);
    if (!s) return err(reply, 404, 'sandbox not found');
    const t = (req.body as { timeout?: number } | undefined)?.timeout;
    if (typeof t !== 'number') return err(reply, 400, 'timeout is required');
    s.timeout = t;
    return reply.status(204).send();
  });
  on('GET', '/sandboxes/{sandboxID}/metrics', async (req, reply) => {
    const s = sandboxes.get((req.params as { sandboxID: string }).sandboxID);
    if (!s) return err(reply, 404, 'sandbox not found');
    return [{
      timestamp: now(), timestampUnix: Math.floor(Date.now() / 1000), cpuCount: 2, cpuUsedPct: 12.5,
      memUsed: 2 ** 20, memTotal: 512 * 2 ** 20, memCache: 0, diskUsed: 2 ** 20, diskTotal: 2048 * 2 ** 20,
    }];
  });

  const logsOf = (s: SandboxRow): SandboxLogEntry[] => [{ timestamp: s.startedAt, level: 'info', message: 'sandbox booting', fields: { logger: 'node-agent' } }];
  on('GET', '/sandboxes/{sandboxID}/logs', async (req, reply) => {
    const s = sandboxes.get((req.params as { sandboxID: string }).sandboxID);
    if (!s) return err(reply, 404, 'sandbox not found');
    const q = req.query as { start?: number; limit?: number };
    const entries = pickSandboxLogs(logsOf(s), parseSandboxLogsQuery({ cursor: q.start, limit: q.limit }));
    return { logs: entries.map((e) => ({ timestamp: e.timestamp, line: e2bLogLine(e) })), logEntries: entries };
  });
  on('GET', '/v2/sandboxes/{sandboxID}/logs', async (req, reply) => {
    const s = sandboxes.get((req.params as { sandboxID: string }).sandboxID);
    if (!s) return err(reply, 404, 'sandbox not found');
    return { logs: pickSandboxLogs(logsOf(s), parseSandboxLogsQuery(req.query as Record<string, unknown>)) };
  });

  // ------------------------------------------------------------ templates
  const newJob = (templateId: string, kind: JobKind, fail: boolean): JobRow => {
    const job: JobRow = {
      job_id: `job-${randomUUID().slice(0, 8)}`, template_id: templateId, kind, status: 'PENDING', phase: null, error: null,
      progress: { layers: [], message: '' }, artifact_id: null, created_at: now(), updated_at: now(), finished_at: null, step: 0, fail,
    };
    jobs.set(job.job_id, job);
    return job;
  };
  const advance = (job: JobRow) => {
    if (job.status === 'BUILT' || job.status === 'FAILED') return;
    job.step = Math.min(job.step + 1, BUILD_SCRIPT.length - 1);
    const tpl = templates.get(job.template_id);
    if (job.fail && job.step >= 3) {
      Object.assign(job, { status: 'FAILED', error: 'image has no root filesystem', finished_at: now() });
      if (tpl) Object.assign(tpl, { status: 'failed', error: job.error });
      return;
    }
    Object.assign(job, BUILD_SCRIPT[job.step], { updated_at: now() });
    const pulled = job.step === 1 ? 0.5 : job.step >= 2 ? 1 : 0;
    job.progress.layers = [
      { digest: 'sha256:aaaa', total_bytes: 4000, done_bytes: Math.round(4000 * pulled) },
      { digest: 'sha256:bbbb', total_bytes: 1000, done_bytes: Math.round(1000 * pulled) },
    ];
    if ((job.status as JobRow['status']) === 'BUILT') {
      job.finished_at = now();
      if (tpl) Object.assign(tpl, { status: 'ready', artifact_id: `art-${job.template_id}`, updated_at: now() });
    }
  };

  on('POST', '/svc/template', async (req, reply) => {
    const b = (req.body ?? {}) as Record<string, any>;
    const sources = ['image', 'oci_layout', 'docker_archive', 'rootfs_tar'].filter((k) => b[k]);
    if (sources.length !== 1) return err(reply, 400, 'exactly one source is required', 130400);
    if (b.alias && findTemplate(b.alias)) return err(reply, 400, `alias ${b.alias} is taken`, 130400);
    const id = `tpl-${randomUUID().slice(0, 8)}`;
    const job = newJob(id, 'CREATE', String(b[sources[0]]).includes('broken'));
    templates.set(id, {
      template_id: id, alias: b.alias ?? null, status: 'building', source_image_ref: String(b[sources[0]]),
      latest_job_id: job.job_id, artifact_id: null, created_at: now(), updated_at: now(), cpu_count: b.cpu_count ?? 2,
      memory_mb: b.memory_mb ?? 512, disk_size_mb: b.disk_size_mb ?? 2048, with_cube_ca: b.with_svc_ca ?? true, error: null,
      source_kind: sources[0] as SourceKind, image_info: null, legacy: false,
    });
    return reply.status(202).send({ template_id: id, job_id: job.job_id, status: job.status });
  });
  on('GET', '/svc/template', async () => ({ templates: [...templates.values()] }));
  on('GET', '/svc/template/{id}', async (req, reply) => {
    const t = findTemplate((req.params as { id: string }).id);
    return t ?? err(reply, 404, 'template not found', ErrorCodes.templateNotFound);
  });
  on('DELETE', '/svc/template/{id}', async (req, reply) => {
    const t = findTemplate((req.params as { id: string }).id);
    if (!t) return err(reply, 404, 'template not found', ErrorCodes.templateNotFound);
    templates.delete(t.template_id);
    return reply.status(204).send();
  });
  on('PUT', '/svc/template/{id}/alias', async (req, reply) => {
    const t = findTemplate((req.params as { id: string }).id);
    if (!t) return err(reply, 404, 'template not found', ErrorCodes.templateNotFound);
    const alias = (req.body as { alias?: string | null } | undefined)?.alias;
    t.alias = alias || null;
    return t;
  });
  on('POST', '/svc/template/redo', async (req, reply) => {
    const t = findTemplate(String((req.body as { template_id?: string } | undefined)?.template_id ?? ''));
    if (!t) return err(reply, 404, 'template not found', ErrorCodes.templateNotFound);
    const job = newJob(t.template_id, 'REDO', false);
    Object.assign(t, { status: 'building', latest_job_id: job.job_id });
    return reply.status(202).send({ template_id: t.template_id, job_id: job.job_id, status: job.status });
  });
  on('POST', '/svc/template/migrate', async (req, reply) => {
    const t = findTemplate(String((req.body as { template_id?: string } | undefined)?.template_id ?? ''));
    if (!t) return err(reply, 404, 'template not found', ErrorCodes.templateNotFound);
    return t;
  });
  on('GET', '/svc/template/build/{jobId}/status', async (req, reply) => {
    const job = jobs.get((req.params as { jobId: string }).jobId);
    if (!job) return err(reply, 404, 'job not found', ErrorCodes.templateNotFound);
    advance(job);
    const { step: _s, fail: _f, ...wire } = job;
    return wire;
  });

  serveFakeNodes(on, nodes);
  serveFakeVolumes(app, on, { volumes, drivers: opts.volumeDrivers ?? ['local'], sandboxes: () => sandboxes.values() });

  const events = serveFakeEvents(app, (id) => sandboxes.has(id));

  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url: address,
    app,
    requests,
    sandboxes,
    templates,
    jobs,
    nodes,
    volumes,
    events,
    busyOnce,
    lastCreate: () => creates[creates.length - 1],
    close: async () => { creates = []; await app.close(); },
  };
}
