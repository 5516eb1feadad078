#!/usr/bin/env node
// Runs the bundled CLI (dist/svc.mjs, from `npm run build`) when it exists, otherwise the
// TypeScript sources through tsx, so `npx svc` works in a fresh checkout.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const bundle = join(here, '..', '..', '..', 'dist', 'svc.mjs');

if (existsSync(bundle)) {
  await import(pathToFileURL(bundle).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(join(here, '..', 'src', 'main.ts')).href);
}
