/** For whole-platform tests: a fresh database on each engine the environment offers (db/test-databases.ts). */
export { availableTestDatabases, type TestDatabase } from '../db/test-databases.ts';
