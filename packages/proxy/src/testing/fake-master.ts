/**
 * A stand-in for the master's internal routes, for tests and the proxy benchmark: an
 * in-memory sandbox table that the test edits directly, and a record of every call. It passes
 * the same contract suite as the master (contracts/master-internal.contract.ts).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { SvcError, createHttpApp, requireSharedToken, silentLogger } from '@svc/common';
import { CLUSTER_TOKEN_HEADER, MASTER_OPEN_PATHS } from '@svc/contracts/cluster-token';
import { fileSignatureProblem } from '@svc/common/envd-signature';
import { MASTER_INTERNAL_ROUTES as I, type DueSandbox, type LifecycleReason, type OnTimeout, type SandboxRoute } from '@svc/contracts/master-internal';
import { serve } from '@svc/contracts/route-table';

export interface FakeSandbox extends SandboxRoute {
  onTimeout: OnTimeout;
  /** Listed by GET /internal/v1/lifecycle/due while true. */
  due: boolean;
}

export interface FakeMasterCalls {
  route: string[];
  activity: string[][];
  pause: Array<{ sandboxId: string; reason: LifecycleReason }>;
  resume: Array<{ sandboxId: string; reason: LifecycleReason }>;
  kill: Array<{ sandboxId: string; reason: LifecycleReason }>;
  due: number;
  /** Look-ups of a signed file URL's sandbox. */
  signatureLookups: number;
}

export class FakeMaster {
  readonly sandboxes = new Map<string, FakeSandbox>();
  calls: FakeMasterCalls = emptyCalls();
  /** Milliseconds the sandbox spends in `pausing` / `resuming`. */
  pauseDelayMs = 0;
  resumeDelayMs = 0;
  /** When set, resume answers with this error instead. */
  resumeFailure: { status: number; message: string } | undefined;
  /** Awaited inside pause before the state changes (lets a test hold a pause open). */
  beforePause: ((sandboxId: string) => Promise<void>) | undefined;
  /** Called after each resume with the route that resume answers; may change it (a new address). */
  onResumed: ((sb: FakeSandbox) => void) | undefined;
  private app: FastifyInstance | undefined;
  url = '';

  /** clusterToken: refused without it, as the master with cluster_token set (docs/cluster.md). */
  constructor(private readonly opts: { clusterToken?: string } = {}) {}

  add(sb: Partial<FakeSandbox> & { sandboxId: string }): FakeSandbox {
    const full: FakeSandbox = {
      state: 'running', nodeId: 'node-1', address: '127.0.0.1', envdPort: 49983, autoResume: false,
      onTimeout: 'kill', due: false, ...sb,
    };
    this.sandboxes.set(full.sandboxId, full);
    return full;
  }

  set(sandboxId: string, patch: Partial<FakeSandbox>): void {
    const sb = this.sandboxes.get(sandboxId);
    if (!sb) throw new Error(`no fake sandbox ${sandboxId}`);
    Object.assign(sb, patch);
  }

  get(sandboxId: string): FakeSandbox {
    const sb = this.sandboxes.get(sandboxId);
    if (!sb) throw new Error(`no fake sandbox ${sandboxId}`);
    return sb;
  }

  resetCalls(): void { this.calls = emptyCalls(); }

  async start(port = 0): Promise<string> {
    const app = createHttpApp({ logger: silentLogger() });
    requireSharedToken(app, {
      token: this.opts.clusterToken ?? '', header: CLUSTER_TOKEN_HEADER, setting: 'cluster_token', openPaths: MASTER_OPEN_PATHS, listen: `127.0.0.1:${port}`,
      exposure: 'is the fake master',
    });
    const find = (id: string) => {
      const sb = this.sandboxes.get(id);
      if (!sb) throw new SvcError(404, `sandbox ${id} not found`);
      return sb;
    };

    serve(app, I.route, async (req) => {
      this.calls.route.push(req.params.id);
      return routeOf(find(req.params.id));
    });

    serve(app, I.routeBySignature, async (req) => {
      this.calls.signatureLookups++;
      const signed = req.body;
      for (const sb of this.sandboxes.values()) {
        if (sb.state !== 'terminated' && sb.envdAccessToken && fileSignatureProblem(signed, sb.envdAccessToken, 0) === undefined) return routeOf(sb);
      }
      throw new SvcError(401, 'invalid signature: no sandbox signed this file URL');
    });

    serve(app, I.activity, async (req, reply) => {
      const ids = req.body.sandboxIds;
      this.calls.activity.push(ids);
      for (const id of ids) { const sb = this.sandboxes.get(id); if (sb) sb.due = false; }
      return reply.status(204).send();
    });

    serve(app, I.due, async (): Promise<DueSandbox[]> => {
      this.calls.due++;
      return [...this.sandboxes.values()]
        .filter((sb) => sb.due && (sb.state === 'running' || sb.state === 'paused'))
        .map((sb) => ({ sandboxId: sb.sandboxId, state: sb.state, onTimeout: sb.onTimeout, endAt: new Date().toISOString() }));
    });

    serve(app, I.pause, async (req) => {
      const sb = find(req.params.id);
      this.calls.pause.push({ sandboxId: sb.sandboxId, reason: req.body.reason });
      assertNotGone(sb);
      if (sb.state !== 'running') throw new SvcError(409, `sandbox ${sb.sandboxId} is ${sb.state}`);
      assertDueForTimeout(sb, req.body.reason);
      sb.state = 'pausing';
      try {
        await this.beforePause?.(sb.sandboxId);
      } catch (err) {
        sb.state = 'running'; // the pause was abandoned
        throw err;
      }
      if (this.pauseDelayMs) await sleep(this.pauseDelayMs);
      sb.state = 'paused';
      sb.due = false;
      return routeOf(sb);
    });

    serve(app, I.resume, async (req) => {
      const sb = find(req.params.id);
      this.calls.resume.push({ sandboxId: sb.sandboxId, reason: req.body.reason });
      if (this.resumeFailure) throw new SvcError(this.resumeFailure.status, this.resumeFailure.message);
      assertNotGone(sb);
      if (sb.state === 'running') return routeOf(sb);
      if (sb.state !== 'paused') throw new SvcError(409, `sandbox ${sb.sandboxId} is ${sb.state}`);
      sb.state = 'resuming';
      if (this.resumeDelayMs) await sleep(this.resumeDelayMs);
      sb.state = 'running';
      sb.due = false;
      this.onResumed?.(sb);
      return routeOf(sb);
    });

    serve(app, I.kill, async (req, reply) => {
      const sb = find(req.params.id);
      this.calls.kill.push({ sandboxId: sb.sandboxId, reason: req.body.reason });
      assertDueForTimeout(sb, req.body.reason);
      sb.state = 'terminated';
      sb.terminateReason = req.body.reason === 'timeout' ? 'timeout' : 'killed';
      sb.due = false;
      return reply.status(204).send();
    });

    await app.listen({ port, host: '127.0.0.1' });
    this.app = app;
    this.url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async close(): Promise<void> { await this.app?.close(); }
}

/** As the master: a killed or timed-out sandbox is gone for pause and resume. */
function assertNotGone(sb: FakeSandbox): void {
  if (sb.state === 'terminated') throw new SvcError(410, `sandbox ${sb.sandboxId} was ${sb.terminateReason === 'timeout' ? 'timed out' : 'killed'}`);
}

/** As the master: the idle timeout acts only on a sandbox still due (traffic may have moved its deadline). */
function assertDueForTimeout(sb: FakeSandbox, reason: LifecycleReason | undefined): void {
  if (reason === 'timeout' && !sb.due) throw new SvcError(409, `sandbox ${sb.sandboxId} is no longer due: its idle deadline moved`);
}

function routeOf(sb: FakeSandbox): SandboxRoute {
  const { onTimeout: _o, due: _d, ...route } = sb;
  return route;
}

function emptyCalls(): FakeMasterCalls {
  return { route: [], activity: [], pause: [], resume: [], kill: [], due: 0, signatureLookups: 0 };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
