/**
 * The borders between packages (docs/design.md, "Borders"), checked by `npm run lint`:
 * - a package imports only the packages its package.json declares, and the declarations point
 *   down the layering below (a test may also compose any package's entry points);
 * - it reaches another package only through an entry point its package.json exports, never a
 *   file inside it;
 * - no module imports itself round a circle.
 * Benchmarks and whole-platform tests (bench/, test/) measure internals and are not packages.
 */
const { readdirSync, readFileSync, existsSync } = require('node:fs');
const { join } = require('node:path');

/** Lowest first: a package may depend only on packages before it. */
const LAYERS = ['common', 'http1', 'contracts', 'volumes', 'envd', 'code-interpreter', 'mcp-gateway', 'node-agent', 'template-center', 'master', 'lifecycle', 'proxy', 'egress', 'sdk', 'mcp', 'api', 'console', 'cli'];

const root = process.env.SVC_LINT_ROOT || __dirname;
const packages = readdirSync(join(root, 'packages')).filter((p) => existsSync(join(root, 'packages', p, 'package.json')));
const manifest = (p) => JSON.parse(readFileSync(join(root, 'packages', p, 'package.json'), 'utf8'));
const depsOf = (p) => Object.keys(manifest(p).dependencies ?? {}).filter((d) => d.startsWith('@svc/')).map((d) => d.slice(5));

for (const p of packages) {
  if (!LAYERS.includes(p)) throw new Error(`.dependency-cruiser.cjs: packages/${p} has no place in LAYERS`);
  for (const d of depsOf(p)) {
    if (LAYERS.indexOf(d) >= LAYERS.indexOf(p)) throw new Error(`packages/${p}/package.json declares @svc/${d}, which is not below it in LAYERS`);
  }
}

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** The files a package's exports name, as one path pattern ("./*" entries allow a folder). */
function entryPattern(p) {
  const targets = Object.values(manifest(p).exports ?? {}).filter((t) => typeof t === 'string' && t.startsWith('./src/'));
  const parts = targets.map((t) => esc(`packages/${p}/${t.slice(2)}`).replace('\\*', '.+'));
  return parts.length ? `^(?:${parts.join('|')})$` : '^$';
}

const TESTS = '(?:\\.test\\.ts$|\\.contract\\.ts$|/testing/|/test-support/)';

const forbidden = [
  { name: 'no-circular', severity: 'error', comment: 'modules that import each other round a circle', from: {}, to: { circular: true } },
];
for (const p of packages) {
  const allowed = [p, ...depsOf(p)];
  forbidden.push({
    name: `undeclared-from-${p}`,
    severity: 'error',
    comment: `packages/${p} may import only ${allowed.join(', ')} (its package.json dependencies, which point down the layering)`,
    from: { path: `^packages/${p}/`, pathNot: TESTS },
    to: { path: '^packages/', pathNot: `^packages/(?:${allowed.map(esc).join('|')})/` },
  });
  forbidden.push({
    name: `deep-import-into-${p}`,
    severity: 'error',
    comment: `another package may use packages/${p} only through the entry points its package.json exports`,
    from: { path: '^packages/', pathNot: `^packages/${p}/` },
    to: { path: `^packages/${p}/`, pathNot: entryPattern(p) },
  });
}

module.exports = {
  forbidden,
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: join(root, 'tsconfig.json') },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'default'], extensions: ['.ts', '.tsx', '.js', '.mjs', '.json'] },
    combinedDependencies: false,
  },
};
