/**
 * The SDK's fakes put together as the MCP tools see a platform: the fake API, and one data-plane
 * URL that forwards by the routing headers as the proxy does, envd's port to the fake envd
 * (host processes and files) and the code interpreter's to its fake. Like the proxy, it answers
 * 502 on envd's port, and 409 or 404 on another port, for a sandbox that is paused or unknown.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { startFakeApi, type FakeApi } from '@svc/sdk/testing/fake-api';
import { startFakeCodeInterpreter, type FakeCodeInterpreter } from '@svc/sdk/testing/fake-code-interpreter';
import { startFakeEnvd, type FakeEnvd } from '@svc/sdk/testing/fake-envd';

export interface FakePlatform {
  api: FakeApi;
  envd: FakeEnvd;
  ci: FakeCodeInterpreter;
  /** The data plane's URL. */
  sandboxUrl: string;
  /** The key the fake API wants (any key passes when it was started with checkKey false). */
  apiKey: string;
  close(): Promise<void>;
}

const CODE_INTERPRETER_PORT = '49999';

export async function startFakePlatform(opts: { checkKey?: boolean } = {}): Promise<FakePlatform> {
  const apiKey = 'key-mcp';
  const api = await startFakeApi(opts.checkKey === false ? {} : { apiKey });
  // run_code's sandboxes come from this template
  api.templates.set('code-interpreter-v1', { ...api.templates.get('base')!, template_id: 'code-interpreter-v1', alias: 'code-interpreter-v1' });
  const envd = await startFakeEnvd();
  const ci = await startFakeCodeInterpreter();
  const server = createServer((req, res) => route(req, res));
  const route = (req: IncomingMessage, res: ServerResponse) => {
    const id = String(req.headers['e2b-sandbox-id'] ?? '');
    const port = String(req.headers['e2b-sandbox-port'] ?? '49983');
    const envdPort = port === '49983';
    const row = api.sandboxes.get(id);
    if (!row || row.state !== 'running') {
      const status = envdPort ? 502 : row ? 409 : 404;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ code: status, message: `sandbox ${id} is ${row ? row.state : 'unknown'}` }));
      return;
    }
    const target = new URL(port === CODE_INTERPRETER_PORT ? ci.url : envd.url);
    const upstream = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502).end(err.message);
      else res.destroy(err);
    });
    res.on('close', () => { if (!res.writableFinished) upstream.destroy(); });
    req.pipe(upstream);
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    api, envd, ci, apiKey,
    sandboxUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await ci.close();
      await envd.close();
      await api.close();
    },
  };
}
