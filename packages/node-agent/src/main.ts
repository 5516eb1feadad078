import { createLogger, loadConfig } from '@svc/common';
import { startNodeAgent } from './index.ts';

/** Runs the node agent alone: `node --import tsx packages/node-agent/src/main.ts [config.yaml]`. */
const logger = createLogger('node-agent');
try {
  const cfg = loadConfig({ file: process.argv[2] });
  const agent = await startNodeAgent(cfg, { logger });
  const stop = async (signal: string) => {
    logger.info({ signal }, 'stopping (sandboxes keep running and are adopted at the next start)');
    await agent.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
} catch (err) {
  logger.fatal({ err }, 'node agent failed to start');
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 100).unref();
}
