/**
 * Installing what is not built in, without the internet: what is installed already is used as
 * is, a GitHub checkout's installCmd runs once, and a failed install names the server and the
 * internet it needs (a fake `npm` on PATH stands in for the registry).
 */
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { CATALOG } from './catalog.ts';
import { ensureGithubRepo, ensureNpmServer, InstallError } from './install.ts';

let dir: string;
const lines: string[] = [];
const log = (m: string) => lines.push(m);
before(async () => { dir = await mkdtemp(join(tmpdir(), 'mcp-gateway-install-')); });
after(async () => { await rm(dir, { recursive: true, force: true }); });

test('an npm server installed already (by pull) is run from its bin, with no npm run', async () => {
  const pkgDir = join(dir, 'servers/brave/node_modules/@modelcontextprotocol/server-brave-search');
  await mkdir(pkgDir, { recursive: true });
  await writeFile(join(pkgDir, 'package.json'), JSON.stringify({ version: CATALOG.brave.version, bin: { 'mcp-server-brave-search': 'dist/index.js' } }));
  assert.equal(await ensureNpmServer('brave', CATALOG.brave, dir, log), join(pkgDir, 'dist/index.js'));
  assert.ok(!lines.some((l) => l.includes('npm install')), lines.join('\n'));
});

test('a failed npm install names the server, the package and the internet it needs', async () => {
  const bin = join(dir, 'bin');
  await mkdir(bin, { recursive: true });
  await writeFile(join(bin, 'npm'), '#!/bin/sh\necho "npm error code ENOTFOUND registry.npmjs.org" >&2\nexit 1\n');
  await chmod(join(bin, 'npm'), 0o755);
  const path = process.env.PATH;
  process.env.PATH = `${bin}:${path}`;
  try {
    await assert.rejects(ensureNpmServer('tavily', CATALOG.tavily, dir, log), (err: Error) => {
      assert.ok(err instanceof InstallError);
      assert.match(err.message, /^MCP server 'tavily': npm install tavily-mcp@0\.2\.22 failed \(exit code 1\); it needs the sandbox's internet access:\nnpm error code ENOTFOUND/);
      return true;
    });
  } finally {
    process.env.PATH = path;
  }
});

test('a GitHub checkout present already is not cloned; its installCmd runs once, with the entry\'s envs', async () => {
  const spec = { name: 'github/acme/tool', owner: 'acme', repo: 'tool', installCmd: 'echo "$GREETING" >> installed.txt', env: { GREETING: 'hi' } };
  const repo = join(dir, 'github/acme/tool');
  await mkdir(repo, { recursive: true });
  assert.equal(await ensureGithubRepo(spec, dir, log), repo);
  assert.equal(await ensureGithubRepo(spec, dir, log), repo);
  assert.equal(await readFile(join(repo, 'installed.txt'), 'utf8'), 'hi\n');
  assert.ok(!lines.some((l) => l.includes('git clone')));
});
