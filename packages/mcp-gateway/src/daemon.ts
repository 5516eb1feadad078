/**
 * `mcp-gateway daemon`: the gateway itself, started detached by `mcp-gateway --config` (start.ts)
 * with the config in the state directory and the token in GATEWAY_ACCESS_TOKEN. It fetches what
 * must be fetched, starts every server and waits for each to initialize, then serves /mcp, and
 * only then tells the foreground (one JSON line on the fd MCP_GATEWAY_READY_FD names): ready, or
 * what failed, after which it exits 1. SIGTERM or SIGINT stops the servers and exits 0.
 */
import { closeSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { Aggregator } from './aggregator.ts';
import { Backend, type ListKind } from './backend.ts';
import { parseConfig } from './config.ts';
import { frontServer } from './front.ts';
import { startHttp, type GatewayHttp } from './http.ts';
import { prepareLaunch } from './launch.ts';
import { log } from './log.ts';
import { gatewayPaths, listenAddress, nodeCommand } from './paths.ts';

/** What the daemon tells the foreground. */
export type ReadyMessage = { ok: true; url: string; servers: string[]; tools: number } | { ok: false; error: string };

function tell(message: ReadyMessage): void {
  const fd = Number(process.env.MCP_GATEWAY_READY_FD);
  if (!Number.isInteger(fd) || fd < 3) return;
  try {
    writeSync(fd, `${JSON.stringify(message)}\n`);
    closeSync(fd);
  } catch (err) {
    // The foreground was killed meanwhile (the SDK's command timeout): the log has it all.
    log(`telling the foreground failed: ${(err as Error).message}`);
  }
}

export async function runDaemon(version: string): Promise<void> {
  const paths = gatewayPaths();
  const token = process.env.GATEWAY_ACCESS_TOKEN;
  if (!token) {
    tell({ ok: false, error: 'GATEWAY_ACCESS_TOKEN is not set' });
    process.exit(1);
  }
  // The servers get the sandbox's environment, not the gateway's token nor its plumbing.
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'GATEWAY_ACCESS_TOKEN' && k !== 'MCP_GATEWAY_READY_FD') env[k] = v;

  // The gateway must outlive a bug in one request or one backend's transport: log it, keep serving.
  process.on('uncaughtException', (err) => log(`uncaught exception: ${err.stack ?? err.message}`));
  process.on('unhandledRejection', (err) => log(`unhandled rejection: ${(err as Error)?.stack ?? String(err)}`));
  const specs = parseConfig(readFileSync(paths.configFile, 'utf8'));
  log(`mcp-gateway ${version} (pid ${process.pid}) starting ${specs.map((s) => s.name).join(', ') || 'no servers'}`);
  let aggregator: Aggregator | undefined;
  const notify = (kind: ListKind) => aggregator?.notify(kind);
  const ctx = { stateDir: paths.stateDir, node: nodeCommand(), env, log };
  const backends: Backend[] = [];
  let http: GatewayHttp | undefined;
  let stopping = false;

  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log(`stopping (${code === 0 ? 'asked to' : 'failed to start'})`);
    await http?.close().catch((err: Error) => log(`closing the endpoint: ${err.message}`));
    await Promise.all(backends.map((b) => b.close().catch((err: Error) => log(`[${b.name}] closing: ${err.message}`))));
    // Whatever the servers started and left behind (a runCmd's children) is in this session's group.
    try {
      process.kill(-process.pid, 'SIGTERM');
    } catch (err) {
      log(`signalling the process group: ${(err as Error).message}`);
    }
    try {
      if (readFileSync(paths.pidFile, 'utf8').trim() === String(process.pid)) rmSync(paths.pidFile);
    } catch (err) {
      log(`removing the pid file: ${(err as Error).message}`);
    }
    log('stopped');
    process.exit(code);
  };
  // The group signal above reaches this process too: stop() is already under way then.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => void stop(0));

  const results = await Promise.allSettled(specs.map(async (spec) => {
    const launch = await prepareLaunch(spec, ctx);
    const backend = new Backend(spec.name, launch, log, version, notify);
    backends.push(backend);
    try {
      await backend.start();
    } catch (err) {
      throw new Error(`MCP server '${spec.name}' failed to start: ${(err as Error).message}${backend.stderrText()}`);
    }
  }));
  const failures = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
  if (failures.length > 0) {
    for (const f of failures) log(f);
    tell({ ok: false, error: failures.join('\n') });
    await stop(1);
    return;
  }
  // Config order, whatever order they became ready in: the first configured keeps a clashing name.
  backends.sort((a, b) => specs.findIndex((s) => s.name === a.name) - specs.findIndex((s) => s.name === b.name));
  aggregator = new Aggregator(backends, log);
  const agg = aggregator;
  const { host, port } = listenAddress();
  try {
    http = await startHttp({ host, port, token, log, newServer: () => frontServer(agg, version, log) });
  } catch (err) {
    const error = `the gateway cannot listen on ${host}:${port}: ${(err as Error).message}`;
    log(error);
    tell({ ok: false, error });
    await stop(1);
    return;
  }
  const url = `http://${host}:${port}/mcp`;
  log(`serving ${agg.listTools().length} tools of ${backends.length} servers at ${url}`);
  tell({ ok: true, url, servers: backends.map((b) => b.name), tools: agg.listTools().length });
}
