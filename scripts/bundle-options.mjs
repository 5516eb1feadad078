// esbuild's options for svc's Node bundles: scripts/build.mjs and the tests that bundle a part on
// their own (envd's, the code interpreter's) build them the same way.
export const NODE_BUNDLE = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  logLevel: 'warning',
  // CommonJS dependencies bundled into ESM still call require(); give them one.
  banner: { js: "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);" },
};
