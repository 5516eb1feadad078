import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ENVD_VERSION } from '@svc/contracts/envd-version';

export interface FakeApi {
  url: string;
  close(): Promise<void>;
}

/**
 * The smallest E2B API the official SDK needs for `Sandbox.connect`: it answers
 * `POST /v2/sandboxes/:id/connect` with the envd version and access token of one sandbox.
 */
export async function startFakeApi(envdAccessToken?: string): Promise<FakeApi> {
  const server: Server = createServer((req, res) => {
    const match = /^\/v2\/sandboxes\/([^/]+)\/connect$/.exec(req.url ?? '');
    req.resume();
    if (req.method !== 'POST' || !match) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 404, message: 'not found' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        sandboxID: match[1],
        templateID: 'base',
        clientID: 'local',
        envdVersion: ENVD_VERSION,
        envdAccessToken: envdAccessToken ?? null,
        domain: null,
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
