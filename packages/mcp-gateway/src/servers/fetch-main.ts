/** `fetch.mjs [--user-agent UA] [--ignore-robots-txt]`: svc's fetch server on stdio (the gateway starts it). */
import { createFetchServer } from './fetch.ts';
import { flagValue, serveStdio } from './stdio.ts';

await serveStdio(createFetchServer({ userAgent: flagValue(process.argv, '--user-agent'), ignoreRobotsTxt: process.argv.includes('--ignore-robots-txt') }), 'fetch');
