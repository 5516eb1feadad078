/**
 * A stub of the public REST for the console's bench: this machine cannot run 1,000 sandboxes
 * (idle gVisor sandboxes cost ~2.5% CPU each on 2 cores), so the list's 1,000-row figure is
 * measured against this. It serves the real console files (registerConsole, as the API does) and
 * answers what the sandbox list calls, in E2B's shapes (node_modules/e2b/dist/index.d.ts):
 * /svc/whoami, /teams, /nodes, /v2/sandboxes (limit, nextToken, state, metadata; X-Next-Token), /sandboxes,
 * /sandboxes/metrics, /events/sandboxes, /templates. Any other path is a 404 counted in `unknown`,
 * so the bench can say what the page asked that the stub does not know.
 */
import { createHttpApp, silentLogger } from '@svc/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { registerConsole } from '../packages/api/src/console-files.ts';

export const STUB_KEY = `e2b_${'b'.repeat(40)}`;
const TEAM_ID = '00000000-0000-4000-8000-0000000000be';
const TEMPLATES = [['tpl-base0000000000001', 'base'], ['tpl-web00000000000002', 'web'], ['tpl-data0000000000003', 'data']] as const;

interface Listed {
  sandboxID: string; templateID: string; alias: string; clientID: string; startedAt: string; endAt: string;
  cpuCount: number; memoryMB: number; diskSizeMB: number; metadata: Record<string, string>;
  state: 'running' | 'paused'; envdVersion: string; volumeMounts: never[]; timeout: number; runtime: string;
}

function sandboxes(n: number, now: number): Listed[] {
  return Array.from({ length: n }, (_, i) => {
    const [templateID, alias] = TEMPLATES[i % TEMPLATES.length]!;
    const started = now - i * 7_000;
    return {
      sandboxID: `stub${String(i).padStart(16, '0')}`, templateID, alias, clientID: `node-${i % 3}`,
      startedAt: new Date(started).toISOString(), endAt: new Date(started + 3_600_000).toISOString(),
      cpuCount: 1 + (i % 2), memoryMB: 512, diskSizeMB: 2048, metadata: { bench: 'console', user: `u${i % 50}`, job: `j${i}` },
      state: i % 10 === 9 ? 'paused' : 'running', envdVersion: '0.6.4', volumeMounts: [], timeout: 3600, runtime: 'gvisor',
    };
  });
}

/** "a=1&b=2" with each key and value encoded twice, as the SDK (and the console) send it. */
function metadataPairs(q: string | undefined): Array<[string, string]> {
  if (!q) return [];
  return q.split('&').filter(Boolean).map((kv) => {
    const [k, v = ''] = kv.split('=');
    return [decodeURIComponent(decodeURIComponent(k!)), decodeURIComponent(decodeURIComponent(v))];
  });
}

const list = (v: string | string[] | undefined): string[] => (v === undefined ? [] : (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(',')).filter(Boolean));

export interface StubApi {
  url: string;
  /** Calls per route, and the paths the stub did not know. */
  calls: Record<string, number>;
  unknown: Set<string>;
  close(): Promise<void>;
}

export async function startStubApi(count: number): Promise<StubApi> {
  const all = sandboxes(count, Date.now());
  const app = createHttpApp({ logger: silentLogger() });
  const calls: Record<string, number> = {};
  const unknown = new Set<string>();
  registerConsole(app, 'localhost:1');
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const route = req.routeOptions.url;
    // No route: the app's own 404 answers; the bench reports what the page asked for.
    if (route === undefined) {
      // The browser's own favicon request is not the page's.
      if (req.url !== '/favicon.ico') unknown.add(`${req.method} ${req.url.split('?')[0]}`);
      return;
    }
    calls[route] = (calls[route] ?? 0) + 1;
    if (route.startsWith('/dashboard')) return;
    if (req.headers['x-api-key'] !== STUB_KEY) return reply.status(401).send({ code: 401, message: 'invalid API key' });
  });
  app.get('/svc/whoami', async () => ({ teamId: TEAM_ID, teamName: 'bench', keyId: null, admin: true }));
  app.get('/teams', async () => [{ teamID: TEAM_ID, name: 'bench', isDefault: true, apiKey: STUB_KEY }]);
  app.get('/nodes', async () => [0, 1, 2].map((n) => ({
    nodeId: `node-${n}`, address: `http://127.0.0.1:${9 + n}`, runtime: 'gvisor', runtimes: ['gvisor'], pauseKinds: ['freeze'], status: 'ready',
    capacity: { cpuCount: 64, memoryMB: 262_144 }, usage: { running: Math.round(count / 3), paused: 0, usedMemoryMB: 0 }, labels: {}, version: 'stub', lastHeartbeatAt: new Date().toISOString(),
  })));
  const filtered = (q: { state?: string | string[]; metadata?: string }) => {
    const states = list(q.state);
    const pairs = metadataPairs(q.metadata);
    return all.filter((s) => (!states.length || states.includes(s.state)) && pairs.every(([k, v]) => s.metadata[k] === v));
  };
  app.get<{ Querystring: { limit?: string; nextToken?: string; state?: string | string[]; metadata?: string } }>('/v2/sandboxes', async (req, reply) => {
    const rows = filtered(req.query);
    const limit = Math.min(1000, Math.max(1, Number(req.query.limit ?? 100)));
    const from = req.query.nextToken ? Number(Buffer.from(req.query.nextToken, 'base64url').toString()) : 0;
    const page = rows.slice(from, from + limit);
    if (from + limit < rows.length) reply.header('X-Next-Token', Buffer.from(String(from + limit)).toString('base64url'));
    reply.header('X-Total-Running', String(all.filter((s) => s.state === 'running').length));
    return page;
  });
  app.get<{ Querystring: { metadata?: string } }>('/sandboxes', async (req) => filtered({ state: 'running', metadata: req.query.metadata }));
  app.get<{ Querystring: { sandbox_ids?: string | string[] } }>('/sandboxes/metrics', async (req) => {
    const now = Date.now();
    const ids = list(req.query.sandbox_ids);
    return {
      sandboxes: Object.fromEntries(ids.map((id, i) => [id, {
        timestamp: new Date(now).toISOString(), timestampUnix: Math.floor(now / 1000), cpuCount: 1, cpuUsedPct: (i * 7) % 100,
        memUsed: 20_000_000 + i * 1000, memTotal: 536_870_912, diskUsed: 80_000, diskTotal: 2_147_483_648,
      }])),
    };
  });
  app.get('/events/sandboxes', async () => []);
  app.get('/templates', async () => TEMPLATES.map(([templateID, alias]) => ({ templateID, aliases: [alias], names: [alias], public: false, buildStatus: 'ready' })));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, calls, unknown, close: () => app.close() };
}
