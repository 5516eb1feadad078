// The web console (docs/console.md): a browser bundle of packages/console (Preact, xterm.js, the
// one stylesheet), minified and split so that the terminal loads only when it is opened; the API
// serves dist/console at /dashboard. Part of `npm run build`; alone: `node scripts/build-console.mjs`.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export async function buildConsole() {
  rmSync('dist/console', { recursive: true, force: true });
  mkdirSync('dist/console', { recursive: true });
  await build({
    entryPoints: ['packages/console/src/main.tsx'],
    outdir: 'dist/console',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome110', 'firefox110', 'safari16'],
    minify: true,
    sourcemap: 'linked',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    entryNames: '[name]',
    chunkNames: 'chunks/[name]-[hash]',
    legalComments: 'linked',
    logLevel: 'warning',
  });
  // Last: the API reads the folder again when index.html changes (packages/api/src/console-files.ts).
  copyFileSync('packages/console/src/index.html', 'dist/console/index.html');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildConsole();
