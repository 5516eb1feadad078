/**
 * What the deliverer tests share (deliverer*.test.ts): a fresh SQLite database with the webhook
 * tables, webhook receivers on 127.0.0.1 that note every request, and deliverers over them.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { randomId, silentLogger, type Logger } from '@svc/common';
import type { SandboxEventType, WebhookDeliveryOutcome } from '@svc/contracts/events';
import { openDatabase, type Db } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { migrations } from '../migrations/index.ts';
import { newVaultKeyFile, Vault } from '../vault/vault.ts';
import { WebhookDeliverer, type DelivererOptions } from './deliverer.ts';
import { EventRepo } from './event-repo.ts';
import { EventRecorder, type EventSubject } from './recorder.ts';
import { WebhookRepo } from './webhook-repo.ts';
import { WebhookTargets } from './webhook-target.ts';
import { WebhookService } from './webhooks.ts';

export const TEAM = 'team-deliver';
export const SECRET = 'whsec-å/+?=-secret';
export const CREATED: SandboxEventType = 'sandbox.lifecycle.created';
export const KILLED: SandboxEventType = 'sandbox.lifecycle.killed';
export const UPDATED: SandboxEventType = 'sandbox.lifecycle.updated';
const TIMING = { pollMs: 50, retryDelayMs: 100, timeoutMs: 500 };

interface Hit { headers: http.IncomingHttpHeaders; body: string; at: number }
/** What an endpoint does with its n-th request (0-based): answer with a status, or hold it unanswered. */
type Behaviour = (n: number) => number | 'hang';

interface Endpoint { url: string; port: number; hits: Hit[] }

type Truthy<T> = Exclude<T, false | null | undefined | 0 | ''>;

export async function waitFor<T>(what: string, fn: () => T | Promise<T>, ms = 3000): Promise<Truthy<T>> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v as Truthy<T>;
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** As E2B's docs verify a delivery: sha256(secret + rawBody), base64 with + → -, / → _ and no padding. */
export function e2bSignature(secret: string, rawBody: string): string {
  return createHash('sha256').update(secret + rawBody).digest('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function subject(sandboxId = `sbx-${randomId(8)}`, team = TEAM): EventSubject {
  return { sandbox_id: sandboxId, team_id: team, template_id: 'base', cpu_count: 2, memory_mb: 512, metadata: '{"app":"web"}', started_at: Date.now() };
}

/** One fresh database with everything a master runs for webhooks; `fn` runs, then all of it stops. */
/** A logger that keeps every line it is given, as parsed JSON, for a test to look through. */
export function recordingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, logger: pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line) as Record<string, unknown>); } }) };
}

export async function withHarness(fn: (h: Awaited<ReturnType<typeof open>>) => Promise<void>, opts: { logger?: Logger } = {}): Promise<void> {
  const h = await open(opts);
  try {
    await fn(h);
  } finally {
    await h.close();
  }
}

async function open(opts: { logger?: Logger } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-deliverer-'));
  const config = { driver: 'sqlite' as const, path: join(dir, 'master.sqlite') };
  const db = await openDatabase(config);
  await migrate(db.kysely, db.driver, migrations);
  const dbs: Db[] = [db];
  const servers: http.Server[] = [];
  const deliverers: WebhookDeliverer[] = [];
  const logger = opts.logger ?? silentLogger();
  const vault = new Vault(newVaultKeyFile());
  /** What each host name resolves to, now; a test changes it between create and delivery. */
  const names = new Map<string, string[]>();
  const targets = new WebhookTargets({
    platform: async () => [], pools: ['10.200.0.0/16'], allowCidrs: [],
    resolve: async (host) => {
      const found = names.get(host);
      if (!found) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
      return found;
    },
  });
  const repo = new WebhookRepo(db.kysely);
  const events = new EventRepo(db.kysely);
  const recorder = new EventRecorder({ events, webhooks: repo, logger, onQueued: () => deliverers.forEach((d) => d.kick()) });
  const service = new WebhookService({ repo, targets, vault });

  return {
    db, repo, recorder, service, names,
    /** A webhook receiver on 127.0.0.1 that notes every request it gets. */
    async endpoint(behaviour: Behaviour = () => 200): Promise<Endpoint> {
      const hits: Hit[] = [];
      const server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const n = hits.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() }) - 1;
          const b = behaviour(n);
          if (b !== 'hang') res.writeHead(b, { 'content-type': 'text/plain' }).end('ok');
        });
      });
      servers.push(server);
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const port = (server.address() as AddressInfo).port;
      return { url: `http://127.0.0.1:${port}/hook`, port, hits };
    },
    /** A port nothing listens on. */
    async closedPort(): Promise<number> {
      const s = http.createServer();
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
      const port = (s.address() as AddressInfo).port;
      await new Promise<void>((r) => s.close(() => r()));
      return port;
    },
    async hook(url: string, types: SandboxEventType[] = [CREATED], enabled = true, team = TEAM) {
      return service.create(team, { name: `hook-${randomId(4)}`, url, enabled, events: types, signatureSecret: SECRET });
    },
    /** Another master's connection to the same database file. */
    async secondDb(): Promise<Db> {
      const other = await openDatabase(config);
      dbs.push(other);
      return other;
    },
    deliverer(holder: string, o: Partial<DelivererOptions> & { db?: Db; start?: boolean } = {}): WebhookDeliverer {
      const d = new WebhookDeliverer({ repo: new WebhookRepo((o.db ?? db).kysely), targets, vault, logger, holder, ...TIMING, ...o });
      deliverers.push(d);
      if (o.start !== false) d.start();
      return d;
    },
    async last(webhookId: string, team = TEAM): Promise<WebhookDeliveryOutcome | undefined> {
      return (await service.get(team, webhookId)).lastDelivery;
    },
    async deliveries(webhookId: string) {
      return db.kysely.selectFrom('t_svc_webhook_delivery').selectAll().where('webhook_id', '=', webhookId).execute();
    },
    async close() {
      await Promise.allSettled(deliverers.map((d) => d.stop()));
      for (const s of servers) s.closeAllConnections();
      await Promise.allSettled(servers.map((s) => new Promise((r) => s.close(r))));
      await Promise.allSettled(dbs.map((d) => d.close()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
