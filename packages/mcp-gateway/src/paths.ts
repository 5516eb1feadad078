/**
 * Where the gateway keeps its files, and how it starts Node programs. In a sandbox it runs as
 * root with the E2B layout: the token at /etc/mcp-gateway/.token (the SDK's getMcpToken reads
 * it), state under /var/lib/mcp-gateway, the daemon's log at /var/log/mcp-gateway.log.
 * MCP_GATEWAY_STATE_DIR puts all of them in one directory instead (tests, a run without root).
 */
import { join } from 'node:path';

export interface GatewayPaths {
  /** The access token, mode 0600 in a 0700 directory. */
  tokenFile: string;
  /** Installed catalog servers, cloned repositories, the memory server's graph, the pid and config files. */
  stateDir: string;
  /** The running daemon's pid (a second --config stops it). */
  pidFile: string;
  /** The config the daemon runs (it can hold credentials: 0600). */
  configFile: string;
  /** The daemon's stdout and stderr, its servers' stderr among them. */
  logFile: string;
}

export function gatewayPaths(env: NodeJS.ProcessEnv = process.env): GatewayPaths {
  const override = env.MCP_GATEWAY_STATE_DIR;
  const stateDir = override ?? '/var/lib/mcp-gateway';
  return {
    tokenFile: override ? join(override, '.token') : '/etc/mcp-gateway/.token',
    stateDir,
    pidFile: join(stateDir, 'gateway.pid'),
    configFile: join(stateDir, 'config.json'),
    logFile: override ? join(override, 'gateway.log') : '/var/log/mcp-gateway.log',
  };
}

/** The port and address the daemon serves /mcp on. */
export function listenAddress(env: NodeJS.ProcessEnv = process.env): { host: string; port: number } {
  return { host: env.MCP_GATEWAY_HOST ?? '0.0.0.0', port: Number(env.MCP_GATEWAY_PORT ?? 50005) };
}

/**
 * The command that starts Node: the launcher sets MCP_GATEWAY_NODE, since on /.svc's runtime
 * Node runs through its own loader and this process's execPath is that loader, not Node.
 */
export function nodeCommand(env: NodeJS.ProcessEnv = process.env): string[] {
  const configured = env.MCP_GATEWAY_NODE?.trim();
  return configured ? configured.split(/\s+/) : [process.execPath];
}
