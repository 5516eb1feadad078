import { chmodSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig, validateConfig, ConfigError, warmPoolStart, REDACTED_PATHS, setWorkerLogFile, type Logger, type SvcConfig } from '@svc/common';
import { ensureDebianImage } from '@svc/template-center';
import { ensureBaseTemplate, startMadeTemplate, waitForMadeTemplate, type BaseTemplateOptions, type MadeTemplateStart } from './base-template.ts';
import { prepareDataDir } from './data-dir.ts';
import { clusterHeaders } from '@svc/contracts/cluster-token';
import { dataDirShortOfSpace } from './disk-space.ts';
import { minimalKernelHint, prepareMicrovm } from './microvm-setup.ts';
import { runDemo } from './demo.ts';
import { buildMcpGatewayTemplate } from './mcp-gateway-template.ts';
import { startPlatform, type Platform } from './platform.ts';
import { ensureLocalTls } from './local-tls.ts';
import { loadOrCreateSecrets } from './secrets.ts';
import { dataDirFlag, exportLines } from './shell-lines.ts';
import { useBuiltInVolumePlugin } from './local-volume-plugin.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { readyJson, writeEndpointFile } from './up-ready.ts';

export interface UpOptions {
  dataDir?: string; config?: string; rebuildBase?: boolean; demo?: boolean; json?: boolean; domain?: string; tls?: boolean; runtime?: string;
  /** false: no code-interpreter-v1 template (--no-code-interpreter). */
  codeInterpreter?: boolean;
  /** false: no mcp-gateway template (--no-mcp-gateway). */
  mcpGateway?: boolean;
}

/** A configuration that cannot work ends `svc up` with its message and exit code 2. */
function orExitOnConfigError<T>(read: () => T): T {
  try {
    return read();
  } catch (e) {
    if (e instanceof ConfigError) { process.stderr.write(`svc up: ${e.message}\n`); process.exit(2); }
    throw e;
  }
}

/** `svc up`: every component in one process on embedded defaults, until SIGINT or SIGTERM. */
export async function runUp(opts: UpOptions): Promise<void> {
  // Validated below, once --tls has made its certificate (the HTTPS port needs one).
  const cfg: SvcConfig = orExitOnConfigError(() => loadConfig({ file: opts.config, overrides: opts.dataDir ? { data_dir: opts.dataDir } : {}, validate: false }));
  if (process.getuid && process.getuid() !== 0) {
    process.stderr.write('svc up: sandboxes need root (network namespaces, mounts, gVisor); run it as root or with sudo\n');
    process.exit(2);
  }
  if (opts.tls && !(opts.domain || cfg.sandbox_domain)) {
    process.stderr.write('svc up: --tls needs --domain (or sandbox_domain): the certificate is for <port>-<sandboxID>.<domain>\n');
    process.exit(2);
  }
  let dataDirWarning: string | undefined;
  try {
    dataDirWarning = prepareDataDir(cfg.data_dir);
  } catch (err) {
    process.stderr.write(`svc up: ${(err as Error).message}\n`);
    process.exit(2);
  }
  if (dataDirWarning) process.stderr.write(`svc up: ${dataDirWarning}\n`);
  // One svc up per data directory (data-dir-lock.ts), taken before anything in it is written.
  try {
    lockDataDir(cfg.data_dir);
  } catch (err) {
    process.stderr.write(`svc up: ${(err as Error).message}\n`);
    process.exit(2);
  }
  if (opts.codeInterpreter === false) cfg.template_center.code_interpreter_template = false;
  if (opts.mcpGateway === false) cfg.template_center.mcp_gateway_template = false;
  // A data directory that never came up builds its templates: on a full disk, say so now, not midway through one.
  const fresh = !existsSync(join(cfg.data_dir, 'endpoint.json'));
  const short = fresh ? dataDirShortOfSpace(cfg.data_dir, cfg.template_center.code_interpreter_template) : undefined;
  if (short) { process.stderr.write(`svc up: ${short}\n`); process.exit(2); }
  if (opts.domain) cfg.sandbox_domain = opts.domain;
  // Checked with the rest of the configuration below (node_agent.runtime).
  if (opts.runtime) cfg.node_agent.runtime = opts.runtime;
  let caFile: string | undefined;
  if (opts.tls) {
    try {
      const tls = ensureLocalTls(join(cfg.data_dir, 'tls'), cfg.sandbox_domain);
      // Clients that trusted the CA before (a browser's import) must trust this one: said once, at its making.
      if (tls.newCa) process.stderr.write(`svc up: made a local CA for ${cfg.sandbox_domain} and the names under it only: ${tls.caFile}; clients trust it (NODE_EXTRA_CA_CERTS, a browser's import)\n`);
      caFile = tls.caFile;
      cfg.proxy.tls_cert_file = tls.certFile;
      cfg.proxy.tls_key_file = tls.keyFile;
      cfg.proxy.https_port ||= 443;
    } catch (err) {
      process.stderr.write(`svc up: ${(err as Error).message}\n`);
      process.exit(2);
    }
  }
  const builtInPlugin = orExitOnConfigError(() => useBuiltInVolumePlugin(cfg));
  orExitOnConfigError(() => validateConfig(cfg));
  const secrets = loadOrCreateSecrets(cfg.data_dir);
  if (!cfg.api.api_key) {
    cfg.api.api_key = secrets.api_key;
    cfg.api.previous_api_keys = [cfg.api.previous_api_keys, ...(secrets.previous_api_keys ?? [])].filter(Boolean).join(',');
  }
  cfg.template_center.callback_token ||= secrets.template_callback_token;
  cfg.svcproxy.admin_token ||= secrets.proxy_admin_token;
  cfg.master.upload_signing_key ||= secrets.upload_signing_key;
  cfg.proxy.admin_token ||= cfg.svcproxy.admin_token;
  cfg.egress.admin_token ||= secrets.egress_admin_token;
  cfg.node_agent.token ||= secrets.node_agent_token;
  cfg.cluster_token ||= secrets.cluster_token;

  const logFile = join(cfg.data_dir, 'svc.log');
  // Its lines name sandboxes, teams and addresses: the operator's to read (an older one was 0644).
  try {
    if (existsSync(logFile)) chmodSync(logFile, 0o600);
  } catch (err) {
    process.stderr.write(`svc: ${logFile} could not be made 0600 (${(err as Error).message}); other users may read it\n`);
  }
  const logger = pino({ level: process.env.SVC_LOG_LEVEL ?? 'info', redact: { paths: REDACTED_PATHS, censor: '[redacted]' } },
    pino.multistream([
      { level: 'info', stream: pino.destination({ dest: logFile, mkdir: true, sync: false, mode: 0o600 }) },
      { level: 'warn', stream: pino.destination({ fd: 2, sync: false }) },
    ]));
  const say = (line: string) => { if (!opts.json) process.stdout.write(`${line}\n`); };
  // The proxies' worker processes log into the same file.
  setWorkerLogFile(logFile);

  say(`svc: starting (data directory ${cfg.data_dir}, logs in ${logFile})`);
  // A stop asked for during the start (Ctrl+C, or systemd's stop while the guest kernel builds)
  // once did what a default signal does: the components started so far were left running and
  // their sandboxes, mounts and rules stayed until the next start took them back. Now a stop
  // before the components start exits at once (nothing of ours runs yet), one during their start
  // closes them as soon as the start returns, and a second stop exits at once.
  let platform: Awaited<ReturnType<typeof startPlatform>> | undefined;
  let volumePlugin: { close(): Promise<void> } | undefined;
  let phase: 'preparing' | 'starting' | 'up' = 'preparing';
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      say(`svc: ${signal} again: exiting now; what was left running is taken back by the next svc up`);
      process.exit(1);
    }
    stopping = true;
    if (phase === 'preparing') {
      say(`svc: ${signal} received before any component started: exiting`);
      process.exit(130);
    }
    if (phase === 'starting') {
      say(`svc: ${signal} received while the components start: stopping them as soon as they are up (${signal} again to exit now)`);
      return;
    }
    say(`svc: ${signal} received, stopping every sandbox and component`);
    await platform?.close();
    await volumePlugin?.close();
    logger.flush();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  await prepareMicrovm({ cfg, say }).catch((err: Error) => {
    process.stderr.write(`svc up: ${err.message}\n`);
    process.exit(1);
  });
  // A fresh data directory makes `base` first thing: its machine-wide image (mmdebstrap, about
  // two minutes here when not cached) is made while the components start, and the template
  // center's build of it then finds it made (docs/quickstart.md).
  const baseRootfs = fresh || opts.rebuildBase ? prefetchBaseImage(!!opts.rebuildBase, say) : Promise.resolve();
  phase = 'starting';
  volumePlugin = builtInPlugin ? await builtInPlugin(logger.child({ component: 'volume-plugin-local' })) : undefined;
  const up = platform = await startPlatform(cfg, logger);
  phase = 'up';
  if (stopping) {
    say('svc: the components are up: stopping them as asked');
    await up.close();
    await volumePlugin?.close();
    logger.flush();
    process.exit(0);
  }

  const made: BaseTemplateOptions = { masterUrl: up.masterUrl, masterHeaders: clusterHeaders(cfg.cluster_token), rebuild: !!opts.rebuildBase, say, ...(up.egressCaPem ? { egressCaPem: up.egressCaPem } : {}) };
  try {
    await baseRootfs;
    await ensureBaseTemplate(made);
  } catch (err) {
    process.stderr.write(`svc up: ${(err as Error).message}\n`);
    await up.close();
    await volumePlugin?.close();
    process.exit(1);
  }

  // "Up" means the first creates are served from the warm pool: wait (briefly) for it to fill.
  if (cfg.node_agent.warm_pool_size > 0 && up.runtimes.includes('gvisor')) await waitForWarmPool(up, warmPoolStart(cfg.node_agent), say);
  // code-interpreter-v1's build is asked for before svc says it is up, so that the template exists (building) for
  // every create that follows: one meanwhile waits for it instead of a 404.
  if (cfg.template_center.code_interpreter_template) {
    const started = await startMadeTemplate('code-interpreter-v1', made).catch((err: Error) => {
      say(`code-interpreter-v1 template: ${err.message}`);
      logger.warn({ err: err.message }, 'code-interpreter-v1 could not be started');
      return undefined;
    });
    if (started?.jobId) void codeInterpreterInBackground(started, made, () => stopping, logger);
  }
  // mcp-gateway is base and a link (mcp-gateway-template.ts): a few seconds, or none when cached;
  // asked for after the demo, whose sandbox it would otherwise slow on a fresh machine.
  const mcpGateway = () => {
    if (cfg.template_center.mcp_gateway_template) void buildMcpGatewayTemplate({ url: up.masterUrl, headers: clusterHeaders(cfg.cluster_token) }, say, logger, () => stopping);
  };

  const endpoint = { apiUrl: up.apiUrl, apiKey: cfg.api.api_key, sandboxUrl: up.sandboxUrl, domain: cfg.sandbox_domain, ...(caFile ? { caFile } : {}) };
  const e2bEnv = e2bEnvLines(up, cfg, caFile);
  writeEndpointFile(cfg.data_dir, endpoint, e2bEnv);
  // A terminal's user copies the key; a log (systemd's journal, a CI's output, a file) would keep
  // the admin key for anyone who reads it, so there it is left out and `svc env` prints it.
  const toTerminal = process.stdout.isTTY === true;
  if (opts.json) {
    process.stdout.write(readyJson(endpoint, cfg.data_dir, toTerminal));
    mcpGateway();
    return;
  }
  say('');
  say('svc is up.');
  say(`  API URL:   ${up.apiUrl}`);
  const key = toTerminal ? cfg.api.api_key : `${cfg.api.api_key.slice(0, 8)}... (printed only to a terminal: \`svc env\` prints it)`;
  say(`  API key:   ${key}`);
  say(`  Console:   ${up.apiUrl}/dashboard/  (sign in with the API key)`);
  say(`  Sandboxes: ${up.sandboxUrl}  (template "base" is ready)`);
  say('');
  if (up.sandboxHttpsUrl && caFile) {
    say(`  HTTPS:     ${up.sandboxHttpsUrl}  (https://<port>-<sandboxID>.${cfg.sandbox_domain}; local CA ${caFile})`);
  }
  say('');
  const kernelHint = minimalKernelHint(up.runtimes, cfg);
  if (kernelHint) say(kernelHint);
  say('Use the official e2b SDK unchanged:');
  if (toTerminal) for (const line of exportLines(e2bEnv)) say(`  ${line}`);
  else say(`  eval "$(svc env${dataDirFlag(cfg.data_dir)})"`);
  say('Or the svc CLI and SDK (they read the same endpoint from the data directory):');
  say('  svc sandbox create --template base');
  if (opts.demo) await runDemo(endpoint, say).catch((err) => say(`demo failed: ${(err as Error).message}`));
  mcpGateway();
  say('Press Ctrl+C to stop.');
}

/**
 * `code-interpreter-v1` in the background once `base` is ready: a line when its build starts and
 * one when it is ready or failed (logged too: `--json` prints neither); its progress in `svc tpl
 * status`. A create of it meanwhile waits for it within the create timeout (docs/quickstart.md).
 */
async function codeInterpreterInBackground(started: MadeTemplateStart, made: BaseTemplateOptions, stopping: () => boolean, logger: Logger): Promise<void> {
  try {
    made.say(`code-interpreter-v1 template: building in the background (job ${started.jobId}; svc tpl status ${started.jobId}); creates of it wait for it`);
    logger.info({ jobId: started.jobId, templateId: started.templateId }, 'code-interpreter-v1 building in the background');
    const t = Date.now();
    await waitForMadeTemplate(started, { ...made, quiet: true, pollMs: 2_000 });
    made.say(`code-interpreter-v1 template: ready (${Math.round((Date.now() - t) / 1000)} s)`);
    logger.info({ jobId: started.jobId, ms: Date.now() - t }, 'code-interpreter-v1 ready');
  } catch (err) {
    // A stop cuts the build short: nothing to report then.
    if (stopping()) return;
    made.say(`code-interpreter-v1 template: ${(err as Error).message}`);
    logger.warn({ err: (err as Error).message }, 'code-interpreter-v1 could not be built; its creates answer 503 naming the build');
  }
}

/** The base image, made (or found cached) while the components start; its phases said as they come. */
async function prefetchBaseImage(rebuild: boolean, say: (line: string) => void): Promise<void> {
  let lastPhase = '';
  await ensureDebianImage({
    flavor: 'base', rebuild,
    onProgress: (p) => {
      if (p.phase === 'cached' || p.phase === lastPhase) return;
      lastPhase = p.phase;
      say(`base template: ${p.phase === 'done' ? 'image made from Debian\'s packages' : p.phase}${p.phase === 'done' ? ` in ${Math.round(p.elapsedMs / 1000)} s` : p.message ? ` (${p.message.slice(0, 100)})` : ''}`);
    },
  }).then(() => undefined, (err: Error) => {
    // The template center's build makes it again and fails the template with the reason if it must.
    say(`base template: making its image failed (${err.message}); the build tries again`);
  });
}

async function waitForWarmPool(platform: Platform, size: number, say: (line: string) => void, maxMs = 20_000): Promise<void> {
  const until = Date.now() + maxMs;
  if (platform.warmCount() >= size) return;
  say('warming up the first sandboxes...');
  while (platform.warmCount() < size && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  if (platform.warmCount() === 0) say('no warm sandbox yet (see the log); creates start cold until one is ready');
}

/**
 * What the official SDK needs. With a domain and HTTPS it finds sandboxes by name
 * (https://<port>-<id>.<domain>, trusting the local CA); otherwise through one URL and the
 * E2b-Sandbox-Id header, which works without DNS. E2B_DOMAIN makes getHost() name the domain.
 */
export function e2bEnvLines(platform: { apiUrl: string; sandboxUrl: string; sandboxHttpsUrl?: string }, cfg: SvcConfig, caFile?: string): string[] {
  // E2B's Volume sends its content calls to E2B_VOLUME_API_URL (docs/volumes.md): the same API.
  const lines = [`E2B_API_URL=${platform.apiUrl}`, `E2B_VOLUME_API_URL=${platform.apiUrl}`];
  const byName = !!cfg.sandbox_domain && !!caFile && platform.sandboxHttpsUrl !== undefined && new URL(platform.sandboxHttpsUrl).port === '';
  if (!byName) lines.push(`E2B_SANDBOX_URL=${platform.sandboxUrl}`);
  // The default localhost:<port> names need no telling: the SDK gets the domain with every sandbox.
  if (cfg.sandbox_domain && !/^localhost(:\d+)?$/.test(cfg.sandbox_domain)) lines.push(`E2B_DOMAIN=${cfg.sandbox_domain}`);
  if (caFile) lines.push(`NODE_EXTRA_CA_CERTS=${caFile}`);
  lines.push(`E2B_API_KEY=${cfg.api.api_key}`);
  return lines;
}
