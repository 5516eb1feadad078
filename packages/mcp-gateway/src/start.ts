/**
 * `mcp-gateway --config JSON`, the command the SDK runs and waits for: checks the config and the
 * token, writes the token where getMcpToken reads it (0600 in a 0700 directory), stops a gateway
 * already running (a second --config replaces the first), starts the daemon in a session of its
 * own with its output in the log file, and returns once it serves: 0, or 1 with what failed.
 */
import { spawn } from 'node:child_process';
import { existsSync, openSync, closeSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { parseConfig } from './config.ts';
import { ConfigError } from './config-fields.ts';
import type { ReadyMessage } from './daemon.ts';
import { gatewayPaths, nodeCommand, type GatewayPaths } from './paths.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether the process runs (a zombie does not). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (exited, its new parent has not reaped it yet) is gone for us.
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}

/** Whether the pid is a gateway daemon (not a process that took the number after one died). */
function isDaemon(pid: number): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmdline.includes('daemon') && cmdline.some((a) => a.includes('mcp-gateway'));
  } catch (err) {
    // Gone meanwhile, or no /proc: not one to stop.
    return (err as NodeJS.ErrnoException).code === 'EACCES';
  }
}

/** Stops the running daemon, if any: SIGTERM, then after 10 s SIGKILL to its whole group. Answers its pid. */
export async function stopDaemon(paths: GatewayPaths): Promise<number | undefined> {
  const text = await readFile(paths.pidFile, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
    return '';
  });
  const pid = Number(text.trim());
  if (!Number.isInteger(pid) || pid <= 1 || !processAlive(pid) || !isDaemon(pid)) {
    await rm(paths.pidFile, { force: true });
    return undefined;
  }
  process.kill(pid, 'SIGTERM');
  for (let waited = 0; processAlive(pid) && waited < 10_000; waited += 50) await sleep(50);
  if (processAlive(pid)) process.kill(-pid, 'SIGKILL');
  await rm(paths.pidFile, { force: true });
  return pid;
}

function logTail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch (err) {
    return `(its log ${file} cannot be read: ${(err as Error).message})`;
  }
}

/** Runs the foreground command; answers the exit code, having printed what the user needs. */
export async function startGateway(configText: string, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  parseConfig(configText);
  if (!env.GATEWAY_ACCESS_TOKEN) throw new ConfigError('GATEWAY_ACCESS_TOKEN is not set: it is the token the gateway\'s clients must present');
  const paths = gatewayPaths(env);
  const stopped = await stopDaemon(paths);
  if (stopped) console.log(`mcp-gateway: stopped the gateway that was running (pid ${stopped}) to start this config`);

  await mkdir(dirname(paths.tokenFile), { recursive: true, mode: 0o700 });
  await chmod(dirname(paths.tokenFile), 0o700);
  await writeFile(paths.tokenFile, env.GATEWAY_ACCESS_TOKEN, { mode: 0o600 });
  await chmod(paths.tokenFile, 0o600);
  await mkdir(paths.stateDir, { recursive: true, mode: 0o700 });
  await writeFile(paths.configFile, configText, { mode: 0o600 });
  await chmod(paths.configFile, 0o600);
  await mkdir(dirname(paths.logFile), { recursive: true });

  const [node, ...nodeArgs] = nodeCommand(env);
  const log = openSync(paths.logFile, 'a', 0o600);
  const child = spawn(node, [...nodeArgs, ...process.execArgv, process.argv[1], 'daemon'], {
    detached: true,
    stdio: ['ignore', log, log, 'pipe'],
    env: { ...env, MCP_GATEWAY_READY_FD: '3' },
  });
  closeSync(log);
  if (child.pid === undefined) {
    const err = await new Promise<Error>((resolve) => child.once('error', resolve));
    throw new Error(`starting the gateway daemon failed: ${err.message}`);
  }
  await writeFile(paths.pidFile, String(child.pid));

  const ready = child.stdio[3]!;
  let text = '';
  ready.on('data', (d: Buffer) => { text += d.toString(); });
  const timeoutMs = Number(env.MCP_GATEWAY_START_TIMEOUT ?? 600) * 1000;
  const timedOut = await Promise.race([
    new Promise<false>((resolve) => ready.once('close', () => resolve(false))),
    sleep(timeoutMs).then(() => true),
  ]);
  ready.destroy();
  child.unref();
  if (timedOut) {
    await stopDaemon(paths);
    console.error(`mcp-gateway: the servers did not all start within ${timeoutMs / 1000} s; the log ${paths.logFile} ends with:\n${logTail(paths.logFile)}`);
    return 1;
  }
  let message: ReadyMessage | undefined;
  try {
    message = text.trim() ? (JSON.parse(text) as ReadyMessage) : undefined;
  } catch (err) {
    console.error(`mcp-gateway: the daemon's answer is not JSON (${(err as Error).message}): ${text}`);
  }
  if (message?.ok) {
    console.log(`mcp-gateway: serving ${message.tools} tools of ${message.servers.join(', ') || 'no servers'} at ${message.url}`);
    return 0;
  }
  if (message) console.error(`mcp-gateway: ${message.error}`);
  else console.error(`mcp-gateway: the gateway exited before serving; the log ${paths.logFile} ends with:\n${logTail(paths.logFile)}`);
  if (existsSync(paths.pidFile)) await stopDaemon(paths);
  return 1;
}
