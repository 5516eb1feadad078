import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { compileValidator } from '@svc/common';
import { ENVD_VERSION } from '@svc/contracts/envd-version';
import { routeSchema } from '@svc/contracts/route-schemas';

export interface FakeApi {
  url: string;
  close(): Promise<void>;
}

/**
 * The smallest E2B API the official SDK needs for `Sandbox.connect`: it answers
 * `POST /v2/sandboxes/:id/connect` with the envd version and access token of one sandbox, in the
 * shape the public OpenAPI document gives that answer (checked here, so the stub cannot drift).
 */
const documented = compileValidator({ schema: routeSchema('/v2/sandboxes/{sandboxID}/connect', 'POST').response!['200']!, httpPart: 'body' });

export async function startFakeApi(envdAccessToken?: string): Promise<FakeApi> {
  const server: Server = createServer((req, res) => {
    const match = /^\/v2\/sandboxes\/([^/]+)\/connect$/.exec(req.url ?? '');
    req.resume();
    if (req.method !== 'POST' || !match) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 404, message: 'not found' }));
      return;
    }
    const answer = {
      sandboxID: match[1], templateID: 'base', clientID: 'local', envdVersion: ENVD_VERSION,
      ...(envdAccessToken ? { envdAccessToken } : {}), domain: '',
    };
    if (!documented(answer)) throw new Error(`the stub's connect answer is not the document's: ${JSON.stringify(documented.errors?.[0])}`);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
