import http from 'node:http';
import { SvcError } from '@svc/common';

import { ENVD_PORT } from '@svc/contracts/envd-port';

export interface EnvdAnswer { status: number; body: string }

/**
 * The most of an answer envd's JSON routes are read to: theirs are a few hundred bytes, and
 * callers keep 200 characters of an error. Whoever is root in a sandbox can answer in envd's
 * place, and an answer read whole without a cap had this process hold 560 MB within a second
 * and then die of a RangeError in its 'data' handler (found by a helper reading the node agent
 * as an attacker): the node agent, and under `svc up` the whole platform.
 */
export const MAX_ENVD_ANSWER = 64 * 1024;

/** Reads `res` to its end, at most `max` bytes; past that the request is destroyed with an error that says so. */
export function readCapped(req: http.ClientRequest, res: http.IncomingMessage, max: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    res.on('data', (d: Buffer) => {
      bytes += d.length;
      if (bytes > max) { req.destroy(new Error(`${what}: answer past ${max} bytes, refused`)); return; }
      chunks.push(d);
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    req.on('error', reject);
  });
}

/**
 * One JSON request to envd at `address` (its whole answer, any status). `timeoutMs` bounds the
 * whole request, not only a silence: an envd that trickles a byte at a time is cut all the same.
 */
export function envdRequest(address: string, method: string, path: string, opts: { timeoutMs: number; body?: unknown; headers?: Record<string, string> }): Promise<EnvdAnswer> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const what = `envd at ${address} ${method} ${path}`;
    const req = http.request({
      host: address, port: ENVD_PORT, method, path, agent: false,
      headers: { ...opts.headers, ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
    }, (res) => {
      readCapped(req, res, MAX_ENVD_ANSWER, what).then((body) => { clearTimeout(deadline); resolve({ status: res.statusCode ?? 0, body }); }, fail);
    });
    const fail = (err: Error) => { clearTimeout(deadline); reject(err); };
    const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    req.on('error', fail);
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
