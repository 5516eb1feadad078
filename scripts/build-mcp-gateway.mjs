// Bundles the MCP gateway (packages/mcp-gateway) into a directory that needs nothing but Node 20,
// which the node agent puts into every sandbox at /.svc/mcp-gateway/ (runtime-bundle.ts):
//   mcp-gateway          the launcher (sh): the bundle on /.svc's Node, through its own loader
//   mcp-gateway.mjs      the program (src/main.ts)
//   servers/<name>.mjs   the reference servers it starts, offline: filesystem, memory and
//                        sequentialthinking from their npm packages, git, time and fetch from src/servers/
//   chunks/              the code they share (the MCP SDK, zod), split out once
// scripts/build.mjs writes it to dist/mcp-gateway/; the gateway's tests build it into a temporary directory.
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { NODE_BUNDLE } from './bundle-options.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const gateway = join(root, 'packages/mcp-gateway');
const require = createRequire(join(gateway, 'package.json'));

/** The same command as SANDBOX_NODE_COMMAND (packages/contracts/src/code-interpreter.ts): Node through /.svc's loader, whatever the image's libc. */
const SANDBOX_NODE = '/.svc/lib/ld-linux-x86-64.so.2 --library-path /.svc/lib /.svc/bin/node';

/** A reference server's npm package: the program its `bin` names, and its version. */
function npmServer(name) {
  const manifest = require.resolve(`${name}/package.json`);
  const pkg = JSON.parse(readFileSync(manifest, 'utf8'));
  return { entry: join(dirname(manifest), Object.values(pkg.bin)[0]), version: pkg.version };
}

const thinking = npmServer('@modelcontextprotocol/server-sequential-thinking');

/** sequential-thinking reads its version from its package.json beside it at run time: give it the version instead. */
const inlineVersion = {
  name: 'inline-server-version',
  setup(b) {
    b.onLoad({ filter: /server-sequential-thinking[\\/]dist[\\/]version\.js$/ }, () => ({
      contents: `export const SERVER_VERSION = ${JSON.stringify(thinking.version)};`,
      loader: 'js',
    }));
  },
};

export async function buildMcpGateway(outDir, { sourcemap = false } = {}) {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  await build({
    ...NODE_BUNDLE,
    sourcemap,
    splitting: true,
    outdir: outDir,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunks/[name]-[hash]',
    entryPoints: {
      'mcp-gateway': join(gateway, 'src/main.ts'),
      'servers/filesystem': npmServer('@modelcontextprotocol/server-filesystem').entry,
      'servers/memory': npmServer('@modelcontextprotocol/server-memory').entry,
      'servers/sequentialthinking': thinking.entry,
      'servers/git': join(gateway, 'src/servers/git-main.ts'),
      'servers/time': join(gateway, 'src/servers/time-main.ts'),
      'servers/fetch': join(gateway, 'src/servers/fetch-main.ts'),
    },
    plugins: [inlineVersion],
  });
  const launcher = join(outDir, 'mcp-gateway');
  writeFileSync(launcher, [
    '#!/bin/sh',
    "# svc's MCP gateway (packages/mcp-gateway), on the Node of the sandbox's /.svc runtime. The",
    '# gateway starts Node servers with the same command, which it reads from MCP_GATEWAY_NODE.',
    `MCP_GATEWAY_NODE='${SANDBOX_NODE}'`,
    'export MCP_GATEWAY_NODE',
    `exec ${SANDBOX_NODE} /.svc/mcp-gateway/mcp-gateway.mjs "$@"`,
    '',
  ].join('\n'));
  chmodSync(launcher, 0o755);
}
