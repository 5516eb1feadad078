/**
 * GET /dashboard: the web console (docs/console.md), the static files the build writes into
 * dist/console, served from memory; read again when a page load finds index.html changed (a
 * rebuild writes it last), so a rebuilt console needs no restart. No key is asked for here: the page
 * signs in with the user's key and calls the public REST with it, so the files hold nothing a
 * key would guard. A build without the console answers 503 with the command that builds it.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SvcError } from '@svc/common';

export const CONSOLE_PATH = '/dashboard';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8', '.txt': 'text/plain; charset=utf-8', '.svg': 'image/svg+xml', '.png': 'image/png',
};

interface ConsoleFile {
  body: Buffer;
  /** Compressed once at read (text files): the first load is 29 KB instead of 90 (docs/console.md). */
  gzip: Buffer | undefined;
  type: string;
  etag: string;
  immutable: boolean;
}

/** The source layout (packages/api/src -> dist/console), then beside the bundle (dist/svc.mjs). */
function consoleDir(): string | undefined {
  const candidates = [new URL('../../../dist/console/', import.meta.url), new URL('./console/', import.meta.url)].map((u) => fileURLToPath(u));
  return candidates.find((d) => existsSync(join(d, 'index.html')));
}

function readTree(dir: string): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      if (statSync(full).isDirectory()) { walk(full); continue; }
      const rel = relative(dir, full).split('\\').join('/');
      const ext = name.slice(name.lastIndexOf('.'));
      const body = readFileSync(full);
      const type = TYPES[ext] ?? 'application/octet-stream';
      files.set(rel, {
        body, type, gzip: /^(text|application\/json)/.test(type) && body.length > 1024 ? gzipSync(body) : undefined, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
        // Chunks carry their content's hash in the name (scripts/build.mjs); the rest is revalidated.
        immutable: rel.startsWith('chunks/'),
      });
    }
  };
  walk(dir);
  return files;
}

/**
 * The page may call the API (same origin) and, for the terminal, envd through the sandbox proxy
 * (`http(s)://<port>-<id>.<sandbox_domain>`); xterm.js writes its own style elements.
 */
function securityHeaders(sandboxDomain: string): Record<string, string> {
  const sandboxes = sandboxDomain ? ` http://*.${sandboxDomain} https://*.${sandboxDomain}` : '';
  return {
    'content-security-policy': `default-src 'self'; connect-src 'self'${sandboxes}; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'`,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
  };
}

/** dir: the built console (tests); by default dist/console, looked for as consoleDir() says. */
export function registerConsole(app: FastifyInstance, sandboxDomain: string, opts: { dir?: string } = {}): void {
  const headers = securityHeaders(sandboxDomain);
  let loaded: { dir: string; stamp: number; files: Map<string, ConsoleFile> } | undefined;
  /** The files as they are now: read again when index.html changed since the last read. */
  const current = (): Map<string, ConsoleFile> | undefined => {
    const dir = loaded?.dir ?? opts.dir ?? consoleDir();
    if (!dir) return undefined;
    const stamp = statSync(join(dir, 'index.html'), { throwIfNoEntry: false })?.mtimeMs;
    if (stamp === undefined) return undefined;
    if (loaded?.stamp === stamp) return loaded.files;
    try {
      loaded = { dir, stamp, files: readTree(dir) };
    } catch (err) {
      // A file went away under the read: a build is rewriting the folder.
      throw new SvcError(503, `the web console could not be read (${(err as Error).message}); a build may be under way: retry`);
    }
    return loaded.files;
  };
  const send = (reply: FastifyReply, req: FastifyRequest, path: string) => {
    const ifNoneMatch = req.headers['if-none-match'];
    const files = path === 'index.html' || !loaded ? current() : loaded.files;
    if (!files) throw new SvcError(503, 'the web console is not built: run `npm run build` (it writes dist/console)');
    const f = files.get(path);
    if (!f) throw new SvcError(404, `no such console file: ${path}`);
    reply.headers({ ...headers, etag: f.etag, vary: 'Accept-Encoding', 'cache-control': f.immutable ? 'public, max-age=31536000, immutable' : 'no-cache' });
    if (ifNoneMatch === f.etag) return reply.status(304).send();
    if (f.gzip && /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) return reply.type(f.type).header('content-encoding', 'gzip').send(f.gzip);
    return reply.type(f.type).send(f.body);
  };
  // Relative asset paths in index.html need the trailing slash.
  app.get(CONSOLE_PATH, async (_req, reply) => reply.redirect(`${CONSOLE_PATH}/`, 301));
  app.get(`${CONSOLE_PATH}/`, async (req, reply) => send(reply, req, 'index.html'));
  app.get<{ Params: { '*': string } }>(`${CONSOLE_PATH}/*`, async (req, reply) => send(reply, req, req.params['*'] || 'index.html'));
}
