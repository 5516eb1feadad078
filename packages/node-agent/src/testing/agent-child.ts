// Runs a node agent in its own process for crash tests: config from NATEST_CONFIG (JSON),
// envd bundle from NATEST_ENVD; prints {"url": ...} once serving.
import { silentLogger, type SvcConfig } from '@svc/common';
import { startNodeAgent } from '../index.ts';

const cfg = JSON.parse(process.env.NATEST_CONFIG!) as SvcConfig;
const agent = await startNodeAgent(cfg, { logger: silentLogger(), masterAddr: '', envdBundle: process.env.NATEST_ENVD });
process.stdout.write(`${JSON.stringify({ url: agent.url })}\n`);
