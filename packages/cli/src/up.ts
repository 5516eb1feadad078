import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig, ConfigError, REDACTED_PATHS, type SvcConfig } from '@svc/common';
import { ensureBaseTemplate } from './base-template.ts';
import { runDemo } from './demo.ts';
import { startPlatform } from './platform.ts';
import { loadOrCreateSecrets } from './secrets.ts';

export interface UpOptions { dataDir?: string; config?: string; rebuildBase?: boolean; demo?: boolean; json?: boolean }

/** `svc up`: every component in one process on embedded defaults, until SIGINT or SIGTERM. */
export async function runUp(opts: UpOptions): Promise<void> {
  let cfg: SvcConfig;
  try {
    cfg = loadConfig({ file: opts.config, overrides: opts.dataDir ? { data_dir: opts.dataDir } : {} });
  } catch (e) {
    if (e instanceof ConfigError) { process.stderr.write(`svc up: ${e.message}\n`); process.exit(2); }
    throw e;
  }
  if (process.getuid && process.getuid() !== 0) {
    process.stderr.write('svc up: sandboxes need root (network namespaces, mounts, gVisor); run it as root or with sudo\n');
    process.exit(2);
  }
  mkdirSync(cfg.data_dir, { recursive: true });
  const secrets = loadOrCreateSecrets(cfg.data_dir);
  if (!cfg.api.api_key) {
    cfg.api.api_key = secrets.api_key;
    cfg.api.previous_api_keys = [cfg.api.previous_api_keys, ...(secrets.previous_api_keys ?? [])].filter(Boolean).join(',');
  }
  cfg.template_center.callback_token ||= secrets.template_callback_token;
  cfg.svcproxy.admin_token ||= secrets.proxy_admin_token;
  cfg.proxy.admin_token ||= cfg.svcproxy.admin_token;

  const logFile = join(cfg.data_dir, 'svc.log');
  const logger = pino({ level: process.env.SVC_LOG_LEVEL ?? 'info', redact: { paths: REDACTED_PATHS, censor: '[redacted]' } },
    pino.multistream([
      { level: 'info', stream: pino.destination({ dest: logFile, mkdir: true, sync: false }) },
      { level: 'warn', stream: pino.destination({ fd: 2, sync: false }) },
    ]));
  const say = (line: string) => { if (!opts.json) process.stdout.write(`${line}\n`); };

  say(`svc: starting (data directory ${cfg.data_dir}, logs in ${logFile})`);
  const platform = await startPlatform(cfg, logger);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`svc: ${signal} received, stopping every sandbox and component`);
    await platform.close();
    logger.flush();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  try {
    await ensureBaseTemplate({ masterUrl: platform.masterUrl, rebuild: !!opts.rebuildBase, say });
  } catch (err) {
    process.stderr.write(`svc up: ${(err as Error).message}\n`);
    await platform.close();
    process.exit(1);
  }

  const endpoint = { apiUrl: platform.apiUrl, apiKey: cfg.api.api_key, sandboxUrl: platform.sandboxUrl, domain: cfg.sandbox_domain };
  writeFileSync(join(cfg.data_dir, 'endpoint.json'), JSON.stringify(endpoint, null, 2) + '\n', { mode: 0o600 });
  if (opts.json) {
    process.stdout.write(JSON.stringify({ ready: true, ...endpoint }) + '\n');
    return;
  }
  say('');
  say('svc is up.');
  say(`  API URL:   ${platform.apiUrl}`);
  say(`  API key:   ${cfg.api.api_key}`);
  say(`  Sandboxes: ${platform.sandboxUrl}  (template "base" is ready)`);
  say('');
  say('Use the official e2b SDK unchanged:');
  say(`  export E2B_API_URL=${platform.apiUrl}`);
  say(`  export E2B_SANDBOX_URL=${platform.sandboxUrl}`);
  say(`  export E2B_API_KEY=${cfg.api.api_key}`);
  say('Or the svc CLI and SDK (they read the same endpoint from the data directory):');
  say('  svc sandbox create --template base');
  if (opts.demo) await runDemo(endpoint, say).catch((err) => say(`demo failed: ${(err as Error).message}`));
  say('Press Ctrl+C to stop.');
}
