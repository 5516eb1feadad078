/**
 * The console's bundle (docs/console.md's goal: at most 300 KB gzipped): what Chromium fetches
 * for the first load (the sign-in page: index.html, main.js, main.css and the chunks main.js
 * imports statically), and every file the build wrote (the lazy terminal chunk too), each as the
 * bytes on disk and gzipped (level 6, what a reverse proxy's gzip sends by default). Also whether
 * the API itself compresses them: if not, the raw bytes are what crosses the wire.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';
import { newContext } from '../test/e2e/browser.ts';
import type { Browser } from 'playwright-core';
import { BENCH_ROOT } from './lib/stats.ts';

const DIST = join(BENCH_ROOT, '..', 'dist', 'console');

export interface BundleFigures {
  firstLoad: { files: string[]; bytes: number; gzipBytes: number };
  all: { files: string[]; bytes: number; gzipBytes: number };
  /** The chunks the first load does not fetch (xterm.js and the terminal). */
  lazy: string[];
  /** The Content-Encoding the API answers main.js with to `Accept-Encoding: gzip` (none: it sends raw bytes). */
  servedEncoding: string;
}

function shippedFiles(dir = DIST): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return shippedFiles(full);
    return /\.(js|css|html)$/.test(name) ? [relative(DIST, full)] : [];
  }).sort();
}

function sizes(files: string[]): { files: string[]; bytes: number; gzipBytes: number } {
  let bytes = 0;
  let gzipBytes = 0;
  for (const f of files) {
    const body = readFileSync(join(DIST, f));
    bytes += body.length;
    gzipBytes += gzipSync(body, { level: 6 }).length;
  }
  return { files, bytes, gzipBytes };
}

/** `consoleUrl`: the console's /dashboard/ on a server that serves dist/console. */
export async function measureBundle(browser: Browser, consoleUrl: string): Promise<BundleFigures> {
  const context = await newContext(browser);
  try {
    const page = await context.newPage();
    const fetched = new Set<string>();
    page.on('requestfinished', (req) => {
      const path = new URL(req.url()).pathname;
      if (path.startsWith('/dashboard/')) fetched.add(path.slice('/dashboard/'.length) || 'index.html');
    });
    await page.goto(consoleUrl, { waitUntil: 'networkidle' });
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    const all = shippedFiles();
    const firstLoad = all.filter((f) => fetched.has(f));
    const missing = [...fetched].filter((f) => !all.includes(f) && !f.endsWith('.map'));
    if (missing.length) throw new Error(`the first load fetched files the build did not write: ${missing.join(', ')}`);
    const res = await fetch(`${consoleUrl}main.js`, { headers: { 'accept-encoding': 'gzip' } });
    await res.arrayBuffer();
    return { firstLoad: sizes(firstLoad), all: sizes(all), lazy: all.filter((f) => !fetched.has(f)), servedEncoding: res.headers.get('content-encoding') ?? 'none' };
  } finally {
    await context.close();
  }
}
