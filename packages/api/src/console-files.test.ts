import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { createHttpApp, silentLogger } from '@svc/common';
import { registerConsole } from './console-files.ts';

async function consoleApp(dir: string) {
  const app = createHttpApp({ logger: silentLogger() });
  registerConsole(app, 'localhost:3002', { dir });
  await app.ready();
  return app;
}

function builtConsole(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-console-'));
  mkdirSync(join(dir, 'chunks'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>one</title>');
  writeFileSync(join(dir, 'main.js'), `console.log(${JSON.stringify('x'.repeat(5000))})`);
  writeFileSync(join(dir, 'chunks', 'terminal-ABC123.js'), 'export {}');
  return dir;
}

test('/dashboard serves the built console with its types, a CSP naming the sandbox domain, ETags and immutable chunks', async (t) => {
  const dir = builtConsole();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const app = await consoleApp(dir);
  t.after(() => app.close());
  const bare = await app.inject({ url: '/dashboard' });
  assert.equal(bare.statusCode, 301);
  assert.equal(bare.headers.location, '/dashboard/');
  const page = await app.inject({ url: '/dashboard/' });
  assert.equal(page.statusCode, 200);
  assert.match(String(page.headers['content-type']), /^text\/html/);
  assert.match(String(page.headers['content-security-policy']), /connect-src 'self' http:\/\/\*\.localhost:3002 https:\/\/\*\.localhost:3002/);
  assert.equal(page.headers['x-frame-options'], 'DENY');
  assert.equal(page.headers['cache-control'], 'no-cache');
  const again = await app.inject({ url: '/dashboard/', headers: { 'if-none-match': String(page.headers.etag) } });
  assert.equal(again.statusCode, 304);
  const js = await app.inject({ url: '/dashboard/main.js' });
  assert.match(String(js.headers['content-type']), /^text\/javascript/);
  assert.equal(js.headers['content-encoding'], undefined, 'raw without Accept-Encoding');
  const packed = await app.inject({ url: '/dashboard/main.js', headers: { 'accept-encoding': 'gzip, br' } });
  assert.equal(packed.headers['content-encoding'], 'gzip');
  assert.equal(gunzipSync(packed.rawPayload).toString(), js.body, 'the same bytes, compressed');
  assert.ok(packed.rawPayload.length < js.rawPayload.length / 10, 'compressed');
  const chunk = await app.inject({ url: '/dashboard/chunks/terminal-ABC123.js' });
  assert.match(String(chunk.headers['cache-control']), /immutable/);
});

test('/dashboard: an unknown or escaping path is a JSON 404, a console not built a 503 naming the build, and a rebuild is served without a restart', async (t) => {
  const dir = builtConsole();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const app = await consoleApp(dir);
  t.after(() => app.close());
  for (const url of ['/dashboard/nosuch.js', '/dashboard/../package.json', '/dashboard/%2e%2e/%2e%2e/etc/passwd', '/dashboard/chunks/']) {
    const res = await app.inject({ url });
    assert.ok(res.statusCode === 404 || res.statusCode === 400, `${url}: ${res.statusCode}`);
    assert.equal(typeof res.json().message, 'string', `${url} answers the JSON error body`);
  }
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>two</title>');
  utimesSync(join(dir, 'index.html'), new Date(), new Date(Date.now() + 5000));
  assert.match((await app.inject({ url: '/dashboard/' })).body, /two/, 'a rebuilt console is read again');

  const empty = mkdtempSync(join(tmpdir(), 'svc-console-empty-'));
  t.after(() => rmSync(empty, { recursive: true, force: true }));
  const bare = await consoleApp(empty);
  t.after(() => bare.close());
  const res = await bare.inject({ url: '/dashboard/' });
  assert.equal(res.statusCode, 503);
  assert.match(res.json().message, /npm run build/);
});
