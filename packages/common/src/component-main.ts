import { ConfigError, loadConfig } from './config.ts';
import type { SvcConfig } from './config-types.ts';
import type { Coordination } from './coordination.ts';
import { createLogger, type Logger } from './log.ts';
import { coordinationFor } from './redis-coordination.ts';
import { startTracing } from './tracing.ts';

export interface ComponentContext {
  cfg: SvcConfig;
  logger: Logger;
  /** The coordination store of the config (`redis`: Redis, else in memory), made on first use and closed at the stop. */
  coordination(): Coordination;
  /** The command line after the script, with the config file's argument taken out. */
  args: string[];
}

export interface Stoppable {
  close(): Promise<void>;
}

/** How a component starts from its context: each package's `component.ts`, which its main.ts and `svc <component>` run. */
export type ComponentStart = (ctx: ComponentContext) => Promise<Stoppable | Stoppable[]>;

/**
 * The start-up every component's main.ts shares (docs/development.md, "Running a component"):
 * the config with the same keys as `svc up` (a file given as `--config FILE` or SVC_CONFIG, then
 * the SVC_* variables), a logger named for the component, the coordination store when the
 * component needs one, and a stop on SIGINT or SIGTERM that closes what was started, then the
 * store. A failure to start is one fatal log line and exit code 1 (a configuration error: also one
 * line on stderr, exit code 2). Health is each component's own
 * route (docs/design.md). Traces, when the OTEL_* variables ask for them, are this process's own,
 * as service `svc-<name>` unless OTEL_SERVICE_NAME says otherwise (tracing.ts).
 */
export async function runComponent(name: string, start: ComponentStart, opts: { argv?: string[] } = {}): Promise<void> {
  const logger = createLogger(name);
  const argv = opts.argv ?? process.argv.slice(2);
  let coordination: Coordination | undefined;
  let started: Stoppable[] = [];
  // Before the component: its servers add their span hooks only when tracing is already on.
  const tracing = await startTracing(`svc-${name}`, logger);
  try {
    const { file, args } = configArgument(argv);
    const cfg = loadConfig({ file });
    if (cfg.cluster_tls.cert_file && !process.env.NODE_EXTRA_CA_CERTS) {
      logger.warn('cluster_tls is set and NODE_EXTRA_CA_CERTS is not: this component trusts the system CAs alone when it calls the others; a private cluster CA goes in NODE_EXTRA_CA_CERTS (docs/cluster.md)');
    }
    started = [await start({ cfg, logger, args, coordination: () => (coordination ??= coordinationFor(cfg.redis, { logger })) })].flat();
  } catch (err) {
    // A configuration mistake is the operator's to fix: one line that names the key, exit code 2
    // as `svc up` gives, not a stack (docs/development.md, "Running a component").
    const config = err instanceof ConfigError;
    if (config) {
      logger.fatal({ key: err.key }, `${name} failed to start: ${err.message}`);
      process.stderr.write(`svc ${name}: ${err.message}\n`);
    } else {
      logger.fatal({ err }, `${name} failed to start`);
    }
    await coordination?.close().catch((e: Error) => logger.warn({ err: e.message }, 'closing the coordination store failed'));
    await tracing.close();
    const code = config ? 2 : 1;
    process.exitCode = code;
    setTimeout(() => process.exit(code), 100).unref();
    return;
  }
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, `${name} stopping`);
      void Promise.all(started.map((s) => s.close()))
        .then(() => coordination?.close())
        .catch((err: Error) => logger.error({ err: err.message }, `${name} did not stop cleanly`))
        // Last, however the rest stopped: the spans of the stop itself are sent too.
        .then(() => tracing.close())
        .finally(() => process.exit(0));
    });
  }
}

/** `--config FILE` (or `--config=FILE`) out of the arguments; the rest are the component's. */
export function configArgument(argv: string[]): { file: string | undefined; args: string[] } {
  const args: string[] = [];
  let file: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--config') {
      file = argv[++i];
      if (!file) throw new Error('--config needs a file');
    } else if (a.startsWith('--config=')) {
      file = a.slice('--config='.length);
    } else {
      args.push(a);
    }
  }
  return { file, args };
}
