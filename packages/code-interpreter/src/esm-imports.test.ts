import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rewriteImports } from './esm-imports.ts';

test('static imports become dynamic ones whose names stay in the context', () => {
  assert.equal(rewriteImports("import fs from 'fs'"), 'var { default: fs } = await import("fs");');
  assert.equal(rewriteImports("  import { readFileSync, join as j } from \"node:fs\";"), '  var { readFileSync, join: j } = await import("node:fs");');
  assert.equal(rewriteImports("import * as path from 'path'"), 'var path = await import("path");');
  assert.equal(rewriteImports("import def, * as ns from 'm'"), 'var ns = await import("m"); var { default: def } = ns;');
  assert.equal(rewriteImports("import def, { a } from 'm'"), 'var { default: def, a } = await import("m");');
  assert.equal(rewriteImports("import 'side-effect'"), 'await import("side-effect");');
  assert.equal(rewriteImports("import {\n  a,\n  b,\n} from 'm'"), 'var { a, b } = await import("m");');
});

test('dynamic imports, import.meta and imports inside a line are left alone', () => {
  for (const code of ["const m = await import('m')", 'import.meta.url', "x; import('y')", "const s = 'import x from \"y\"'"]) {
    assert.equal(rewriteImports(code), code);
  }
});
