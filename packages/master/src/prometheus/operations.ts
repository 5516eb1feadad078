/**
 * The master's operations as Prometheus counts and timings (docs/observability.md, "Prometheus"):
 * each API-level create, pause and resume as the master runs it, whoever asked (the API, the idle
 * timeout, a drain, a build), and each webhook delivery attempt.
 */
import { counter, histogram, toSvcError } from '@svc/common';
import type { NodeSandbox } from '@svc/contracts/node-agent';
import type { WebhookDeliveryOutcome } from '@svc/contracts/events';

const CREATE_OUTCOMES = ['ok', 'error', 'refused'] as const;

function make() {
  const creates = counter('svc_sandbox_creates_total', 'Sandbox creates by outcome: ok, error (the platform failed it: 5xx, no capacity, a timeout) or refused (the request was: 4xx, an unknown template, a quota).', ['outcome']);
  // Every outcome's series exists from the start, so a rate over it is 0 rather than absent.
  for (const outcome of CREATE_OUTCOMES) creates.inc({ outcome }, 0);
  return {
    creates,
    createSeconds: histogram('svc_sandbox_create_duration_seconds', 'Sandbox creates that succeeded, from the request to the sandbox recorded: pool warm (a warm-pool sandbox was handed out) or cold (one was booted), and the runtime.', ['pool', 'runtime']),
    pauseSeconds: histogram('svc_sandbox_pause_duration_seconds', 'Sandbox pauses that succeeded (the API, the idle timeout, a drain), from the request to the sandbox paused.'),
    resumeSeconds: histogram('svc_sandbox_resume_duration_seconds', 'Sandbox resumes that succeeded (connect, resume, a request with auto_resume, a drain), from the request to the sandbox running.'),
    webhooks: counter('svc_webhook_deliveries_total', 'Webhook delivery attempts by outcome: delivered, retrying (failed, to be retried) or failed (failed, given up).', ['outcome']),
  };
}

let metrics: ReturnType<typeof make> | undefined;
/** Made on first use: a process that runs no master (a CLI command) registers none. */
const m = () => (metrics ??= make());

const secondsSince = (startedAt: number) => (performance.now() - startedAt) / 1000;

export function countCreated(startedAt: number, node: Pick<NodeSandbox, 'fromWarmPool' | 'runtime'>): void {
  m().createSeconds.observe({ pool: node.fromWarmPool ? 'warm' : 'cold', runtime: node.runtime }, secondsSince(startedAt));
  m().creates.inc({ outcome: 'ok' });
}

export function countCreateFailed(err: unknown): void {
  m().creates.inc({ outcome: toSvcError(err).status < 500 ? 'refused' : 'error' });
}

export function countPaused(startedAt: number): void {
  m().pauseSeconds.observe(secondsSince(startedAt));
}

export function countResumed(startedAt: number): void {
  m().resumeSeconds.observe(secondsSince(startedAt));
}

export function countWebhookAttempt(outcome: WebhookDeliveryOutcome['outcome']): void {
  m().webhooks.inc({ outcome });
}
