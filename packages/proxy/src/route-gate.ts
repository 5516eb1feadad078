import { SvcError } from '@svc/common';
import type { Logger } from '@svc/common';
import { ENVD_PORT } from '@svc/contracts/envd-port';
import type { MasterInternalClient, SandboxRoute } from '@svc/contracts/master-internal';
import type { AutoResumer } from './auto-resumer.ts';
import type { BackendCache } from './backend-cache.ts';
import { accessRefusal, type PresentedAccess } from './access-check.ts';

export interface GateTiming {
  /** Longest a request waits for a pausing or resuming sandbox to settle. */
  settleWaitMs: number;
  /** How often the master is asked again while it settles. */
  settlePollMs: number;
}

/**
 * The cold path: finds a sandbox's route and turns its state into either a running route to
 * forward to or the answer the client gets. Every wait here is bounded.
 */
export class RouteGate {
  constructor(
    private readonly cache: BackendCache,
    private readonly resumer: AutoResumer,
    private readonly timing: GateTiming,
  ) {}

  async runningRoute(sandboxId: string, port: number, presented: PresentedAccess): Promise<SandboxRoute> {
    const deadline = Date.now() + this.timing.settleWaitMs;
    // A cached terminated route answers 410 without asking the master again.
    let route = this.cache.fresh(sandboxId) ?? await this.cache.load(sandboxId).catch((err) => {
      throw isEnvdPort(port) && err instanceof SvcError && err.status === 404 ? notRunning(sandboxId, 'it does not exist') : err;
    });
    // Checked before any gating, so that a request without the token cannot wake a sandbox up.
    const refusal = accessRefusal(route, port, presented);
    if (refusal) throw refusal;
    const envd = isEnvdPort(port, route);
    for (;;) {
      switch (route.state) {
        case 'running':
          return route;
        case 'killing':
        case 'terminated':
          throw envd ? notRunning(sandboxId, route.terminateReason === 'timeout' ? 'it timed out and was killed' : 'it was killed') : gone(route);
        case 'paused':
          if (!route.autoResume) throw envd ? notRunning(sandboxId, 'it is paused; resume it with connect') : pausedWithoutAutoResume(sandboxId);
          // Waking takes the token even where a running sandbox's envd answers without it (/health, preflights).
          const wakeRefusal = accessRefusal(route, port, presented, true);
          if (wakeRefusal) throw wakeRefusal;
          const epoch = this.cache.epoch;
          route = await this.resumer.resume(sandboxId);
          this.cache.set(route, epoch);
          if (route.state === 'running') return route;
          // Still paused (a replica that could not start it yet): asked again after a pause, not at once.
          if (route.state === 'paused') await sleep(this.timing.settlePollMs);
          break;
        case 'pausing':
        case 'resuming':
          if (Date.now() + this.timing.settlePollMs > deadline) {
            throw new SvcError(503, `sandbox ${sandboxId} is ${route.state}; retry shortly`, { headers: { 'Retry-After': '1' } });
          }
          await sleep(this.timing.settlePollMs);
          route = await this.cache.load(sandboxId);
          break;
        default:
          throw new SvcError(502, `sandbox ${sandboxId} is in an unexpected state`);
      }
      if (Date.now() > deadline) {
        throw new SvcError(503, `sandbox ${sandboxId} did not become ready in time; retry shortly`, { headers: { 'Retry-After': '1' } });
      }
    }
  }
}

/** Port 0 (no port named) and the route's envd port are envd's; before a route is known, ENVD_PORT is. */
function isEnvdPort(port: number, route?: SandboxRoute): boolean {
  return port === 0 || port === (route?.envdPort ?? ENVD_PORT);
}

/**
 * envd's port answers a sandbox that is not running with 502, as E2B's proxy does: the official
 * SDK reads 502 as "not running" (`isRunning()` false, a cut stream a TimeoutError) and would
 * throw on 404, 409 or 410 (docs/compatibility.md). Other ports keep 410 and 409.
 */
function notRunning(sandboxId: string, why: string) {
  return new SvcError(502, `sandbox ${sandboxId} is not running: ${why}`);
}

function gone(route: SandboxRoute) {
  const why = route.terminateReason === 'timeout' ? 'timed out and was killed' : 'was killed';
  return new SvcError(410, `sandbox ${route.sandboxId} ${why}; it cannot come back, do not retry`);
}

function pausedWithoutAutoResume(sandboxId: string) {
  return new SvcError(409, `sandbox ${sandboxId} is paused; resume it with connect (Sandbox.connect) before sending requests to it`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Route lookups at the master, with its failures turned into what a data-plane client should see. */
export function masterRouteLookup(master: MasterInternalClient, logger: Logger, timeoutMs: number) {
  return async (sandboxId: string): Promise<SandboxRoute> => {
    try {
      return await master.route(sandboxId, timeoutMs);
    } catch (err) {
      const e = err instanceof SvcError ? err : new SvcError(500, String(err));
      if (e.status === 404) throw new SvcError(404, `sandbox ${sandboxId} not found`);
      logger.warn({ sandboxId, status: e.status, err: e.message }, 'route lookup failed');
      throw new SvcError(503, 'sandbox routing is unavailable right now; retry shortly', { headers: { 'Retry-After': '1' } });
    }
  };
}
