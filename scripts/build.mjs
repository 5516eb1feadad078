// Bundles the parts that run without the workspace around them:
//   dist/envd.mjs  the in-sandbox agent (runs on the Node runtime the node agent injects)
//   dist/code-interpreter.mjs  the in-sandbox code interpreter on port 49999 (same runtime)
//   dist/mcp-gateway/  the in-sandbox MCP gateway, its reference servers and its launcher (same runtime; scripts/build-mcp-gateway.mjs)
//   dist/svc.mjs   the CLI and every component, for `svc up` and a global install
//   dist/volume_plugin.proto  the volume plugin protocol, read beside the bundle by svc.mjs's gRPC plugin client
//   dist/guest-init.sh        the microvm guest's init, put into its initramfs by the node agent
//   dist/svc-volume-local.mjs  the built-in local volume plugin, executable (a `binary_path`, or `--serve-rpc`)
//   dist/console/  the web console the API serves at /dashboard (docs/console.md)
import { build } from 'esbuild';
import { NODE_BUNDLE } from './bundle-options.mjs';
import { buildConsole } from './build-console.mjs';
import { buildMcpGateway } from './build-mcp-gateway.mjs';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync } from 'node:fs';

mkdirSync('dist', { recursive: true });
const common = { ...NODE_BUNDLE, sourcemap: 'linked' };

await build({
  ...common,
  entryPoints: ['packages/envd/src/main.ts'],
  outfile: 'dist/envd.mjs',
  external: ['@lydell/node-pty', '@lydell/node-pty-*'],
});
await build({
  ...common,
  entryPoints: ['packages/code-interpreter/src/main.ts'],
  outfile: 'dist/code-interpreter.mjs',
});
await buildMcpGateway('dist/mcp-gateway', { sourcemap: 'linked' });
await build({
  ...common,
  entryPoints: ['packages/cli/src/main.ts'],
  outfile: 'dist/svc.mjs',
  // native addons and packages that load files relative to themselves stay in node_modules; so does
  // OpenTelemetry's SDK, loaded only when traces are asked for (packages/common/src/tracing.ts)
  external: ['better-sqlite3', '@lydell/node-pty', '@lydell/node-pty-*', 'pg-native', 'pino', 'thread-stream', 'pino-*', '@opentelemetry/*'],
});
// packages/volumes loads its .proto at run time: from the source tree, or beside the bundle
copyFileSync('packages/volumes/proto/volume_plugin.proto', 'dist/volume_plugin.proto');
// The microvm driver puts the guest's init into its initramfs: from the source tree, or beside the bundle
copyFileSync('packages/node-agent/guest/init.sh', 'dist/guest-init.sh');
// self-contained (no external packages): it runs from any directory, given the .proto beside it
await build({
  ...common,
  entryPoints: ['packages/volumes/src/local-plugin/binary-main.ts'],
  outfile: 'dist/svc-volume-local.mjs',
  banner: { js: `#!/usr/bin/env node\n${NODE_BUNDLE.banner.js}` },
});
chmodSync('dist/svc-volume-local.mjs', 0o755);
await buildConsole();
// Native parts of gVisor sandboxes, built with the host's cc (scripts/setup.sh installs gcc and
// libc6-dev): the stat shim preloaded into every program (packages/node-agent/native/stat-shim.c),
// svc's sudo, static so that it runs in any image (packages/node-agent/native/sudo.c), and envd's
// spawner, static as well (packages/envd/native/spawner.c).
const natives = [
  ['dist/svc-stat-shim.so', ['-shared', '-fPIC'], 'packages/node-agent/native/stat-shim.c'],
  ['dist/svc-sudo', ['-static'], 'packages/node-agent/native/sudo.c'],
  ['dist/svc-spawner', ['-static'], 'packages/envd/native/spawner.c'],
];
for (const [out, flags, source] of natives) {
  try {
    execFileSync('cc', ['-O2', '-Wall', ...flags, '-o', out, source], { stdio: 'inherit' });
  } catch (err) {
    console.error(`build: compiling ${source} failed (${err.message}); scripts/setup.sh installs gcc and libc6-dev`);
    process.exit(1);
  }
}
console.log(
  'built dist/envd.mjs, dist/code-interpreter.mjs, dist/mcp-gateway/, dist/svc.mjs, dist/volume_plugin.proto, dist/guest-init.sh, dist/svc-volume-local.mjs, ' +
    'dist/console/, dist/svc-stat-shim.so, dist/svc-sudo and dist/svc-spawner',
);
