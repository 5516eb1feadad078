/** A small node:http client for tests: sets any Host, returns status, headers and body text. */
import { request, type Agent, type IncomingHttpHeaders } from 'node:http';

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  json<T = Record<string, unknown>>(): T;
}

export function call(baseUrl: string, opts: {
  path?: string; method?: string; host?: string; headers?: Record<string, string>; body?: string; agent?: Agent | false; timeoutMs?: number;
  /** The client's own address (another loopback address: another client). */
  localAddress?: string;
} = {}): Promise<Reply> {
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({
      host: u.hostname, port: u.port, method: opts.method ?? 'GET', path: opts.path ?? '/',
      headers: { ...(opts.host ? { host: opts.host } : {}), ...opts.headers },
      agent: opts.agent ?? false,
      timeout: opts.timeoutMs ?? 10_000,
      ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode!, headers: res.headers, body, json: () => JSON.parse(body) });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('test request timed out')));
    req.on('error', reject);
    req.end(opts.body);
  });
}

export const sandboxHost = (port: number, sandboxId: string) => `${port}-${sandboxId}.sandbox.test:3002`;
