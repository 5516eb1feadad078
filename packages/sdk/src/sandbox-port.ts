/**
 * How the SDK reaches a port of a sandbox: every request goes to the data-plane URL and names
 * the sandbox and the port in the routing headers (`E2b-Sandbox-Id`, `E2b-Sandbox-Port`), with
 * envd's access token and, when the sandbox has one, the traffic access token. envd (49983) and
 * the code interpreter (49999) are both reached this way.
 */
const TRAFFIC_TOKEN_HEADER = 'svc-traffic-access-token';
const ACCESS_TOKEN_HEADER = 'X-Access-Token';

/** One sandbox as the data plane sees it. Shared by a sandbox's clients: a reconnect updates its tokens. */
export interface SandboxTarget {
  sandboxUrl: string;
  sandboxId: string;
  envdAccessToken?: string;
  trafficAccessToken?: string;
  requestTimeoutMs: number;
}

export function sandboxPortHeaders(target: SandboxTarget, port: number, extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = {
    'E2b-Sandbox-Id': target.sandboxId,
    'E2b-Sandbox-Port': String(port),
  };
  if (target.envdAccessToken) h[ACCESS_TOKEN_HEADER] = target.envdAccessToken;
  if (target.trafficAccessToken) h[TRAFFIC_TOKEN_HEADER] = target.trafficAccessToken;
  return { ...h, ...extra };
}

/** The data-plane URL of `path`; the port travels in the headers, so it is the same for every port. */
export function sandboxPortUrl(target: SandboxTarget, path: string, query?: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, v);
  const s = q.toString();
  return `${target.sandboxUrl}${path}${s ? `?${s}` : ''}`;
}

/**
 * The domain of `<port>-<sandboxId>.<domain>` host names when the API reported none: the
 * data-plane URL's host and port, `localhost:3002` for a loopback one, so the name resolves locally.
 */
export function dataPlaneDomain(sandboxUrl: string): string {
  const url = new URL(sandboxUrl);
  const loopback = ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
  return `${loopback ? 'localhost' : url.hostname}${url.port ? `:${url.port}` : ''}`;
}
