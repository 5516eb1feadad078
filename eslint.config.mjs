// `npm run lint` (docs/design.md): what tsc and dependency-cruiser do not check.
import tsParser from '@typescript-eslint/parser';
import noSilentCatch from './scripts/lint/no-silent-catch.mjs';

export default [
  { ignores: ['**/node_modules/**', 'dist/**', 'packages/contracts/src/envd/**'] },
  {
    files: ['packages/*/src/**/*.ts', 'scripts/**/*.ts', 'bench/**/*.ts', 'test/**/*.ts'],
    languageOptions: { parser: tsParser, ecmaVersion: 'latest', sourceType: 'module' },
    plugins: { svc: { rules: { 'no-silent-catch': noSilentCatch } } },
    rules: { 'svc/no-silent-catch': 'error' },
  },
];
