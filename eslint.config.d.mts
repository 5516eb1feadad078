// The type of eslint.config.mjs, for test/lint.test.ts.
import type { Linter } from 'eslint';

declare const config: Linter.Config[];
export default config;
