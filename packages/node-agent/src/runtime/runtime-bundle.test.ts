/**
 * The /.svc runtime as assembled for sandboxes: the MCP gateway's directory lands at
 * MCP_GATEWAY_DIR with an executable launcher, a rebuilt gateway makes a new runtime, and a
 * checkout that was not built is refused.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { MCP_GATEWAY_DIR, MCP_GATEWAY_LAUNCHER } from '@svc/contracts/mcp-gateway';
import { ensureRuntimeBundle, SANDBOX_INIT, SANDBOX_RUNTIME_DIR, type RuntimeBundleSource } from './runtime-bundle.ts';

let dir: string;
let src: RuntimeBundleSource;
const inRuntime = (runtime: string, sandboxPath: string) => join(runtime, sandboxPath.slice(SANDBOX_RUNTIME_DIR.length + 1));

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'runtime-bundle-'));
  const built = join(dir, 'dist');
  await mkdir(join(built, 'mcp-gateway/servers'), { recursive: true });
  for (const name of ['envd.mjs', 'code-interpreter.mjs', 'svc-stat-shim.so', 'svc-sudo', 'svc-spawner']) await writeFile(join(built, name), `// ${name}\n`);
  // As a checkout without the executable bit would have it.
  await writeFile(join(built, 'mcp-gateway/mcp-gateway'), '#!/bin/sh\nexec true\n', { mode: 0o644 });
  await writeFile(join(built, 'mcp-gateway/mcp-gateway.mjs'), '// gateway\n');
  await writeFile(join(built, 'mcp-gateway/servers/time.mjs'), '// time\n');
  src = {
    envdBundle: join(built, 'envd.mjs'), nodeBinary: process.execPath, init: SANDBOX_INIT, statShim: join(built, 'svc-stat-shim.so'),
    sudo: join(built, 'svc-sudo'), spawner: join(built, 'svc-spawner'), codeInterpreter: join(built, 'code-interpreter.mjs'), mcpGateway: join(built, 'mcp-gateway'),
  };
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('the MCP gateway\'s directory is in the runtime, its launcher executable; a rebuilt gateway makes a new runtime', { skip: !existsSync(SANDBOX_INIT) && `${SANDBOX_INIT} is not installed` }, async () => {
  const state = join(dir, 'state');
  const first = await ensureRuntimeBundle(state, src);
  assert.equal((await stat(inRuntime(first.dir, MCP_GATEWAY_LAUNCHER))).mode & 0o777, 0o755);
  assert.equal(await readFile(inRuntime(first.dir, `${MCP_GATEWAY_DIR}/servers/time.mjs`), 'utf8'), '// time\n');
  assert.equal(await readFile(inRuntime(first.dir, `${MCP_GATEWAY_DIR}/mcp-gateway.mjs`), 'utf8'), '// gateway\n');
  assert.equal((await ensureRuntimeBundle(state, src)).dir, first.dir);

  await writeFile(join(src.mcpGateway, 'servers/time.mjs'), '// time, rebuilt\n');
  const second = await ensureRuntimeBundle(state, src);
  assert.notEqual(second.dir, first.dir);
  assert.equal(await readFile(inRuntime(second.dir, `${MCP_GATEWAY_DIR}/servers/time.mjs`), 'utf8'), '// time, rebuilt\n');
});

test('a checkout without the gateway built is refused, saying to build', async () => {
  await assert.rejects(ensureRuntimeBundle(join(dir, 'state2'), { ...src, mcpGateway: join(dir, 'dist/no-mcp-gateway') }), /no-mcp-gateway not found \(run npm run build\)/);
});
