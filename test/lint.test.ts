/**
 * `npm run lint` catches what it promises to (docs/design.md, "Borders"): each test feeds the real
 * configuration a small tree or file that breaks one rule and expects a refusal, and a clean one
 * that passes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Linter } from 'eslint';
import eslintConfig from '../eslint.config.mjs';

const REPO = join(import.meta.dirname, '..');

/** A tree of packages (name → package.json fields and files) checked by the repository's dependency-cruiser rules. */
function cruise(packages: Record<string, { deps?: string[]; exports?: Record<string, string>; files: Record<string, string> }>) {
  const root = mkdtempSync(join(tmpdir(), 'svc-lint-'));
  try {
    writeFileSync(join(root, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'ESNext', moduleResolution: 'Bundler', allowImportingTsExtensions: true, noEmit: true } }));
    for (const [name, p] of Object.entries(packages)) {
      const dir = join(root, 'packages', name);
      mkdirSync(join(dir, 'src'), { recursive: true });
      writeFileSync(join(dir, 'package.json'), JSON.stringify({
        name: `@svc/${name}`, type: 'module', exports: p.exports ?? { '.': './src/index.ts' },
        dependencies: Object.fromEntries((p.deps ?? []).map((d) => [`@svc/${d}`, '0.1.0'])),
      }));
      for (const [file, text] of Object.entries(p.files)) {
        mkdirSync(dirname(join(dir, 'src', file)), { recursive: true });
        writeFileSync(join(dir, 'src', file), text);
      }
    }
    const r = spawnSync(join(REPO, 'node_modules/.bin/depcruise'), ['packages', '--config', join(REPO, '.dependency-cruiser.cjs'), '--output-type', 'err'], {
      cwd: root, env: { ...process.env, SVC_LINT_ROOT: root }, encoding: 'utf8',
    });
    return { code: r.status, out: `${r.stdout}${r.stderr}` };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test('dependency-cruiser: a clean tree passes; an upward import, a deep import, a cycle and an upward declaration fail', () => {
  const clean = cruise({
    common: { files: { 'index.ts': 'export const base = 1;\n' } },
    master: { deps: ['common'], files: { 'index.ts': "import { base } from '../../common/src/index.ts';\nexport const m = base;\n", 'inner.ts': 'export const inner = 2;\n' } },
    api: { deps: ['common', 'master'], files: { 'index.ts': "import { m } from '../../master/src/index.ts';\nexport const a = m;\n" } },
  });
  assert.equal(clean.code, 0, clean.out);

  const upward = cruise({
    common: { files: { 'index.ts': "import { m } from '../../master/src/index.ts';\nexport const base = m;\n" } },
    master: { deps: ['common'], files: { 'index.ts': 'export const m = 1;\n' } },
  });
  assert.notEqual(upward.code, 0);
  assert.match(upward.out, /undeclared-from-common/);

  const deep = cruise({
    common: { files: { 'index.ts': 'export const base = 1;\n' } },
    master: { deps: ['common'], files: { 'index.ts': 'export const m = 1;\n', 'inner.ts': 'export const inner = 2;\n' } },
    api: { deps: ['common', 'master'], files: { 'index.ts': "import { inner } from '../../master/src/inner.ts';\nexport const a = inner;\n" } },
  });
  assert.notEqual(deep.code, 0);
  assert.match(deep.out, /deep-import-into-master/);

  const circle = cruise({
    common: { files: { 'index.ts': "export { b } from './b.ts';\nexport const a = 1;\n", 'b.ts': "import { a } from './index.ts';\nexport const b = a;\n" } },
  });
  assert.notEqual(circle.code, 0);
  assert.match(circle.out, /no-circular/);

  const declaredUp = cruise({
    common: { deps: ['master'], files: { 'index.ts': 'export const base = 1;\n' } },
    master: { deps: ['common'], files: { 'index.ts': 'export const m = 1;\n' } },
  });
  assert.notEqual(declaredUp.code, 0);
  assert.match(declaredUp.out, /declares @svc\/master, which is not below it/);
});

test('eslint: empty catch blocks and empty .catch() callbacks fail unless a comment says why', () => {
  const linter = new Linter({ configType: 'flat' });
  const lint = (code: string) => linter.verify(code, eslintConfig, 'packages/common/src/example.ts').map((m) => m.ruleId ?? m.message);
  assert.deepEqual(lint('try { f(); } catch {}\n'), ['svc/no-silent-catch']);
  assert.deepEqual(lint('p.catch(() => {});\n'), ['svc/no-silent-catch']);
  assert.deepEqual(lint('p.catch(function () {});\n'), ['svc/no-silent-catch']);
  assert.deepEqual(lint('try { f(); } catch { /* the file may be gone: nothing to clean */ }\n'), []);
  assert.deepEqual(lint('p.catch(() => { /* the lease expires with its TTL */ });\n'), []);
  assert.deepEqual(lint('p.catch((err: Error) => log.warn({ err }, "failed"));\n'), []);
});

test('eslint: a rejection callback that turns every error into a constant fails unless a block body with a comment says why', () => {
  const linter = new Linter({ configType: 'flat' });
  const lint = (code: string) => linter.verify(code, eslintConfig, 'packages/common/src/example.ts').map((m) => m.messageId ?? m.message);
  for (const constant of ['undefined', 'null', "''", 'false', '0', "'x'", '[]', '({})', 'void 0', '[] as string[]', '-1']) {
    assert.deepEqual(lint(`p.catch(() => ${constant});\n`), ['constant'], `.catch(() => ${constant})`);
    assert.deepEqual(lint(`p.then((v) => v, () => ${constant});\n`), ['constant'], `.then(ok, () => ${constant})`);
  }
  assert.deepEqual(lint('p.catch(function () { return null; });\n'), ['constant']);
  assert.deepEqual(lint('p.catch(() => { return null; });\n'), ['constant']);
  assert.deepEqual(lint('p.catch(() => { return; });\n'), ['constant']);
  assert.deepEqual(lint('p.then(ok, () => {});\n'), ['callback']);
  // logged, handled, or silent on purpose with the reason inside
  assert.deepEqual(lint('p.catch((err: Error) => { log.warn({ sandboxId, err: err.message }, "kill failed"); return null; });\n'), []);
  assert.deepEqual(lint('p.catch((err: NodeJS.ErrnoException) => { if (err.code === "ENOENT") return null; throw err; });\n'), []);
  assert.deepEqual(lint('p.catch(whenMissing(undefined));\n'), []);
  assert.deepEqual(lint('p.catch(() => { /* best effort: the file may already be gone */ return null; });\n'), []);
  assert.deepEqual(lint('p.then(ok, () => { /* not up yet: poll again */ return false; });\n'), []);
  assert.deepEqual(lint('p.catch((err: Error) => err.message);\n'), []);
  assert.deepEqual(lint('p.then(() => null);\n'), [], 'a fulfilment callback is not a rejection handler');
});

test('eslint: a route registered from a literal path fails; one from its route table passes', () => {
  const linter = new Linter({ configType: 'flat' });
  const lint = (code: string, file = 'packages/master/src/example.ts') => linter.verify(code, eslintConfig, file).map((m) => m.ruleId ?? m.message);
  // A route missing from its table: served, and listed nowhere a client or fake reads.
  assert.deepEqual(lint("app.post('/internal/v1/new', async (req) => svc.go(req.body));\n"), ['svc/route-from-table']);
  assert.deepEqual(lint("app.get(`/v1/things/${kind}`, async () => list());\n"), ['svc/route-from-table']);
  assert.deepEqual(lint("app.delete<{ Params: { id: string } }>('/v1/x/:id', async function (req) { return drop(req.params.id); });\n"), ['svc/route-from-table']);
  assert.deepEqual(lint("app.route({ method: 'GET', url: '/v1/y', handler: async () => 1 });\n"), ['svc/route-from-table']);
  assert.deepEqual(lint("this.app.put('/tc/api/v1/layer/:id', handler, async () => 1);\n", 'packages/node-agent/src/testing/fake.ts'), ['svc/route-from-table'], 'fakes too');
  // Beside the table: its body and query schemas would not be checked.
  assert.deepEqual(lint('app.post(R.exec.path, async (req) => run(req.body));\n'), ['svc/route-from-table']);
  assert.deepEqual(lint('scope.get(T.download.path, { exposeHeadRoute: false }, relay);\n'), ['svc/route-from-table']);
  // From the table; a HEAD twin of a table route; a client's call; not a route at all; a test's own server; the gateway's public document routes.
  assert.deepEqual(lint("app.route({ method: 'HEAD', url: DOWNLOAD.path, handler: download });\n"), []);
  assert.deepEqual(lint("master.post('/svc/template', request);\n"), []);
  assert.deepEqual(lint('serve(app, MASTER_ROUTES.getSandbox, async (req) => svc.get(req.params.id));\n'), []);
  assert.deepEqual(lint("app.route({ ...documentedRoute('GET', path), handler });\n"), []);
  assert.deepEqual(lint("headers.get('/x');\nmap.get('/a', fallback);\n"), []);
  assert.deepEqual(lint("app.get('/anything', async () => 1);\n", 'packages/master/src/example.test.ts'), []);
  assert.deepEqual(lint("app.get('/docs', async () => page);\n", 'packages/api/src/example.ts'), []);
});

test('knip: an export nothing imports fails; the same tree without it passes', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-knip-'));
  try {
    const write = (file: string, text: string) => {
      mkdirSync(dirname(join(root, file)), { recursive: true });
      writeFileSync(join(root, file), text);
    };
    write('package.json', JSON.stringify({ name: 'root', private: true, type: 'module', workspaces: ['packages/*'] }));
    write('tsconfig.json', JSON.stringify({ compilerOptions: { module: 'ESNext', moduleResolution: 'Bundler', allowImportingTsExtensions: true, noEmit: true } }));
    write('packages/common/package.json', JSON.stringify({ name: '@svc/common', type: 'module', exports: { '.': './src/index.ts' } }));
    write('packages/common/src/index.ts', "export { used } from './inner.ts';\n");
    write('packages/master/package.json', JSON.stringify({ name: '@svc/master', type: 'module', exports: { '.': './src/index.ts' }, dependencies: { '@svc/common': '0.1.0' } }));
    write('packages/master/src/index.ts', "import { used } from '../../common/src/index.ts';\nexport const m = used;\n");
    const knip = () => {
      const r = spawnSync(join(REPO, 'node_modules/.bin/knip'), ['--config', join(REPO, 'knip.json'), '--reporter', 'compact', '--no-progress'], { cwd: root, encoding: 'utf8' });
      return { code: r.status, out: `${r.stdout}${r.stderr}` };
    };
    write('packages/common/src/inner.ts', 'export const used = 1;\nexport const dead = 2;\n');
    const dead = knip();
    assert.notEqual(dead.code, 0, dead.out);
    assert.match(dead.out, /packages\/common\/src\/inner\.ts: dead/);
    write('packages/common/src/inner.ts', 'export const used = 1;\n');
    const clean = knip();
    assert.equal(clean.code, 0, clean.out);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
