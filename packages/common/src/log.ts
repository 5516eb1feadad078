import pino from 'pino';

export type Logger = pino.Logger;

/** Header and field names whose values never reach a log line. */
export const REDACTED_PATHS = [
  '*.headers["x-api-key"]', '*.headers.authorization', '*.headers["x-access-token"]',
  '*.headers["ext-traffic-access-token"]', '*.headers["svc-traffic-access-token"]', '*.headers["e2b-traffic-access-token"]',
  '*.headers["x-svc-admin-token"]', '*.headers["x-svc-template-callback-token"]', '*.headers["x-svc-node-token"]', '*.headers["x-svc-cluster-token"]',
  'trafficAccessToken', 'envdAccessToken', 'token', 'secret', 'password', '*.password', '*.secret',
];

export function createLogger(component: string, opts: { level?: string } = {}): Logger {
  const level = opts.level ?? process.env.SVC_LOG_LEVEL ?? 'info';
  return pino(
    { name: component, level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' }, base: { component } },
    pino.destination({ fd: 2, sync: false }),
  );
}

/** A logger that drops everything, for tests and quiet embedded use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
