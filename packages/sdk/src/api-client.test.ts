import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { WireSandboxDetail } from '@svc/contracts';
import { ApiClient } from './api-client.ts';
import { InvalidArgumentError, SandboxError } from './errors.ts';

/** A server that records each request's raw URL and answers `{}` (or nothing for DELETE). */
let server: Server;
const urls: string[] = [];
let api: ApiClient;

before(async () => {
  server = createServer((req, res) => {
    urls.push(`${req.method} ${req.url}`);
    req.resume().on('end', () => {
      if (req.method === 'DELETE') res.writeHead(204).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  api = new ApiClient({ apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'k' });
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** A name with a `/`, spaces and non-ASCII letters, and how one path segment carries it. */
const NAME = 'a/b c é😀';
const ENCODED = 'a%2Fb%20c%20%C3%A9%F0%9F%98%80';

describe('ApiClient: path parameters', () => {
  test('a document path: each {name} filled and URL-encoded as one segment', async () => {
    await api.call('GET', '/sandboxes/{sandboxID}', { params: { sandboxID: NAME } });
    assert.equal(urls.at(-1), `GET /sandboxes/${ENCODED}`);
    await api.call('GET', '/templates/{templateID}/builds/{buildID}/status', { params: { templateID: NAME, buildID: 'b 1' }, query: { logsOffset: 3 } });
    assert.equal(urls.at(-1), `GET /templates/${ENCODED}/builds/b%201/status?logsOffset=3`);
    await api.call('DELETE', '/templates/{templateID}', { params: { templateID: NAME } });
    assert.equal(urls.at(-1), `DELETE /templates/${ENCODED}`);
  });

  test('an off-document path (request): filled and encoded the same way', async () => {
    await api.request('GET', '/volumes/{volumeID}', { params: { volumeID: NAME } });
    assert.equal(urls.at(-1), `GET /volumes/${ENCODED}`);
    await api.request('GET', '/svc/keys?teamId={teamId}', { params: { teamId: NAME } });
    assert.equal(urls.at(-1), `GET /svc/keys?teamId=${ENCODED}`);
  });

  test('a list in the query is joined with commas; a URLSearchParams is sent as it is, names repeated', async () => {
    await api.call('GET', '/v2/sandboxes', { query: { state: ['running', 'paused'], limit: 2 } });
    assert.equal(urls.at(-1), 'GET /v2/sandboxes?state=running%2Cpaused&limit=2');
    await api.request('GET', '/events/sandboxes', { query: new URLSearchParams([['types', 'a b'], ['types', 'c'], ['limit', '5']]) });
    assert.equal(urls.at(-1), 'GET /events/sandboxes?types=a+b&types=c&limit=5');
    await api.request('GET', '/events/webhooks', { query: new URLSearchParams() });
    assert.equal(urls.at(-1), 'GET /events/webhooks');
  });

  test('a parameter missing at run time (a JavaScript caller) is refused before any request', async () => {
    const before = urls.length;
    const untyped = api as unknown as { call(method: string, path: string, opts?: object): Promise<unknown> };
    await assert.rejects(untyped.call('GET', '/sandboxes/{sandboxID}', {}), InvalidArgumentError);
    assert.equal(urls.length, before);
  });
});

describe('ApiClient: what is refused before or after sending', () => {
  test('an id of \'\', \'.\' or \'..\' in the path is an InvalidArgumentError, and nothing is sent', async () => {
    const before = urls.length;
    for (const id of ['', '.', '..']) {
      await assert.rejects(api.call('GET', '/sandboxes/{sandboxID}', { params: { sandboxID: id } }), InvalidArgumentError, JSON.stringify(id));
      await assert.rejects(api.request('GET', '/volumes/{volumeID}', { params: { volumeID: id } }), InvalidArgumentError);
    }
    assert.equal(urls.length, before);
    await api.call('GET', '/sandboxes/{sandboxID}', { params: { sandboxID: '...' } });
    assert.equal(urls.at(-1), 'GET /sandboxes/...', 'three dots name no other path');
  });

  test('a redirect is an error naming its status, and the key is not sent where it points', async () => {
    const seen: Array<string | undefined> = [];
    const elsewhere = createServer((req, res) => { seen.push(req.headers['x-api-key'] as string | undefined); res.end('{}'); });
    await new Promise<void>((r) => elsewhere.listen(0, '127.0.0.1', r));
    const redirecting = createServer((_req, res) => {
      res.writeHead(307, { location: `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/sandboxes` }).end();
    });
    await new Promise<void>((r) => redirecting.listen(0, '127.0.0.1', r));
    try {
      const client = new ApiClient({ apiUrl: `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}`, apiKey: 'secret' });
      await assert.rejects(client.call('GET', '/v2/sandboxes'), (err: unknown) =>
        err instanceof SandboxError && err.status === 307 && /^GET \/v2\/sandboxes: the API answered with a redirect \(HTTP 307 to http:\/\/127\.0\.0\.1:\d+\/sandboxes\)/.test(err.message));
      assert.deepEqual(seen, []);
    } finally {
      redirecting.close();
      elsewhere.close();
    }
  });
});

/**
 * Compile-time checks, never run: `tsc` fails on a `@ts-expect-error` line that has no error, so
 * these fail the type check the day the client stops refusing what they do.
 */
async function typeChecks(): Promise<void> {
  // @ts-expect-error a path the document lacks
  await api.call('GET', '/sandboxez/{sandboxID}', { params: { sandboxID: 'x' } });
  // @ts-expect-error the document has the path, not for this method
  await api.call('PUT', '/sandboxes/{sandboxID}', { params: { sandboxID: 'x' } });
  // @ts-expect-error a path written out instead of the template
  await api.call('GET', '/sandboxes/sbx-1', {});
  // @ts-expect-error the template's parameter missing
  await api.call('GET', '/sandboxes/{sandboxID}', {});
  // @ts-expect-error a parameter the template does not have
  await api.call('GET', '/sandboxes/{sandboxID}', { params: { sandboxId: 'x' } });
  // @ts-expect-error a body field the schema does not name
  await api.call('POST', '/sandboxes/{sandboxID}/timeout', { params: { sandboxID: 'x' }, body: { timout: 5 } });
  // @ts-expect-error a document path is not an off-document one
  await api.request('GET', '/sandboxes/{sandboxID}', { params: { sandboxID: 'x' } });
  // the answer's type is the document's 2xx schema's, both ways
  const detail = await api.call('GET', '/sandboxes/{sandboxID}', { params: { sandboxID: 'x' } });
  const asWire: WireSandboxDetail = detail;
  const fromWire: typeof detail = asWire;
  void fromWire;
}
