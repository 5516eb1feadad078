// `npm run lint` (docs/design.md): what tsc and dependency-cruiser do not check.
import tsParser from '@typescript-eslint/parser';
import noSilentCatch from './scripts/lint/no-silent-catch.mjs';
import routeFromTable from './scripts/lint/route-from-table.mjs';

const svc = { rules: { 'no-silent-catch': noSilentCatch, 'route-from-table': routeFromTable } };

export default [
  { ignores: ['**/node_modules/**', 'dist/**', 'packages/contracts/src/envd/**'] },
  {
    files: ['packages/*/src/**/*.ts', 'packages/*/src/**/*.tsx', 'scripts/**/*.ts', 'bench/**/*.ts', 'test/**/*.ts'],
    languageOptions: { parser: tsParser, ecmaVersion: 'latest', sourceType: 'module' },
    plugins: { svc },
    rules: { 'svc/no-silent-catch': 'error' },
  },
  {
    // Servers and their fakes register from route tables. Tests may stand up a one-off server;
    // the API gateway's routes are the public OpenAPI document's, held against it by
    // packages/api/src/openapi.test.ts.
    files: ['packages/*/src/**/*.ts'],
    ignores: ['**/*.test.ts', 'packages/api/src/**'],
    rules: { 'svc/route-from-table': 'error' },
  },
];
