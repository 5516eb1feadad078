import http from 'node:http';
import { SvcError } from '@svc/common';

export const ENVD_PORT = 49983;

export interface EnvdAnswer { status: number; body: string }

/** One JSON request to envd at `address` (its whole answer, any status). */
export function envdRequest(address: string, method: string, path: string, opts: { timeoutMs: number; body?: unknown; headers?: Record<string, string> }): Promise<EnvdAnswer> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = http.request({
      host: address, port: ENVD_PORT, method, path, agent: false, timeout: opts.timeoutMs,
      headers: { ...opts.headers, ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
    }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${opts.timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Undefined when envd answers GET /health with 2xx, else what went wrong. */
async function envdHealthProblem(address: string, timeoutMs: number): Promise<string | undefined> {
  try {
    const r = await envdRequest(address, 'GET', '/health', { timeoutMs });
    return r.status >= 200 && r.status < 300 ? undefined : `answered ${r.status}`;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? (e as Error).message;
  }
}

export async function envdHealthy(address: string, timeoutMs = 1_000): Promise<boolean> {
  return (await envdHealthProblem(address, timeoutMs)) === undefined;
}

/**
 * Polls envd's GET /health until it answers 2xx. When the signal fires first it throws a 504
 * that says what the last attempt got (refused, no route, no answer), which tells a sandbox
 * whose envd never started from one the host cannot reach.
 */
export async function waitForEnvd(address: string, signal: AbortSignal): Promise<void> {
  let delay = 5;
  let problem = 'not tried';
  while (true) {
    if (signal.aborted) throw new SvcError(504, `envd at ${address}:${ENVD_PORT} did not answer in time (last attempt: ${problem})`);
    const p = await envdHealthProblem(address, 250);
    if (p === undefined) return;
    problem = p;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 50);
  }
}

export interface EnvdInit {
  envVars: Record<string, string>;
  accessToken?: string;
  /** The user and directory of commands that name none (a built template's USER and WORKDIR). */
  defaultUser?: string;
  defaultWorkdir?: string;
  timestamp: string;
}

/** envd's POST /init (E2B shape): personalises a started envd with env vars and an access token. */
export async function envdInit(address: string, body: EnvdInit): Promise<void> {
  const r = await envdRequest(address, 'POST', '/init', { timeoutMs: 5_000, body });
  if (r.status < 200 || r.status >= 300) throw new Error(`envd POST /init answered ${r.status}: ${r.body.slice(0, 200)}`);
}
