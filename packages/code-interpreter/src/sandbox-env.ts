import { ENVD_PORT } from '@svc/contracts/envd-port';
import type { Log } from './kernel.ts';

/** envd's route that answers the sandbox's environment variables (E2B's server reads the same one). */
export const ENVD_ENVS_URL = `http://127.0.0.1:${ENVD_PORT}/envs`;
const FETCH_TIMEOUT_MS = 2_000;
/** After a failed fetch, the process environment stands in for this long before envd is asked again. */
const RETRY_AFTER_MS = 60_000;

export interface SandboxEnvVars {
  vars: Record<string, string>;
  /** False when envd did not answer: `vars` is then this process's environment, which kernels inherit anyway. */
  fromEnvd: boolean;
}

/**
 * The sandbox's "global" environment variables, which an execution's own env_vars are restored to
 * afterwards. Fetched from envd with the request's access token once; kept for good once answered.
 */
export class SandboxEnv {
  private answered: Record<string, string> | undefined;
  private failedAt = -Infinity;

  constructor(
    private readonly log: Log,
    private readonly url = ENVD_ENVS_URL,
  ) {}

  async get(accessToken: string | undefined): Promise<SandboxEnvVars> {
    if (this.answered) return { vars: this.answered, fromEnvd: true };
    if (Date.now() - this.failedAt >= RETRY_AFTER_MS) {
      try {
        const res = await fetch(this.url, { headers: accessToken ? { 'x-access-token': accessToken } : {}, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
        if (!res.ok) throw new Error(`status ${res.status}`);
        const body = (await res.json()) as unknown;
        if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new Error('the answer is not an object');
        this.answered = Object.fromEntries(Object.entries(body).filter((e): e is [string, string] => typeof e[1] === 'string'));
        return { vars: this.answered, fromEnvd: true };
      } catch (err) {
        this.failedAt = Date.now();
        this.log('warn', `the sandbox's environment variables could not be read from envd (${(err as Error).message}); using the process environment`, { url: this.url });
      }
    }
    return { vars: Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined)), fromEnvd: false };
  }
}
