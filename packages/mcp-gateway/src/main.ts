/**
 * The `mcp-gateway` program of the mcp-gateway template (E2B's MCP gateway, for the SDK's
 * `Sandbox.create({ mcp })` and `Template.addMcpServer`). The sandbox runs it from /.svc: the
 * launcher dist/mcp-gateway/mcp-gateway runs this bundle on /.svc's Node.
 */
import pkg from '../package.json' with { type: 'json' };
import { ConfigError } from './config-fields.ts';
import { readConfigArg } from './config-source.ts';
import { knownServers } from './config.ts';
import { InstallError } from './install.ts';
import { gatewayPaths, listenAddress } from './paths.ts';
import { pull } from './pull.ts';
import { startGateway, stopDaemon } from './start.ts';

const VERSION = `mcp-gateway ${pkg.version} (svc)`;

function help(): string {
  const paths = gatewayPaths();
  const { port } = listenAddress();
  return `${VERSION}: MCP servers inside a sandbox, behind one streamable HTTP endpoint

Usage:
  mcp-gateway --config '<json>'   start the configured servers and serve their tools, prompts and
                                  resources at http://0.0.0.0:${port}/mcp; returns once it serves
                                  (a gateway already running is stopped first)
  mcp-gateway --config-file PATH  the same, the config read from a file
  mcp-gateway --config -          the same, the config read from standard input
                                  (these two keep its keys off the command line, which every
                                  process of the sandbox can read)
  mcp-gateway pull NAME...        install catalog servers now (Template.addMcpServer runs it at build)
  mcp-gateway stop                stop the running gateway
  mcp-gateway --help | --version

The config is an object of servers by name: ${knownServers()}.
Clients send Authorization: Bearer $GATEWAY_ACCESS_TOKEN (required; written to ${paths.tokenFile}).
Log: ${paths.logFile}. State: ${paths.stateDir}.
`;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(help());
    return 0;
  }
  if (command === '--version' || command === '-v' || command === 'version') {
    console.log(VERSION);
    return 0;
  }
  const config = await readConfigArg(command, rest);
  if (config !== undefined) return startGateway(config);
  if (command === 'pull') {
    await pull(rest);
    return 0;
  }
  if (command === 'stop') {
    const pid = await stopDaemon(gatewayPaths());
    console.log(pid ? `mcp-gateway: stopped the gateway (pid ${pid})` : 'mcp-gateway: no gateway is running');
    return 0;
  }
  if (command === 'daemon') {
    // Loaded here only: the foreground commands start faster without the MCP SDK.
    const { runDaemon } = await import('./daemon.ts');
    await runDaemon(pkg.version);
    return -1;
  }
  throw new ConfigError(`${command === undefined ? 'no command' : `unknown argument '${command}'`}: see mcp-gateway --help`);
}

main(process.argv.slice(2)).then(
  (code) => {
    // The daemon keeps running: its exit is its own.
    if (code >= 0) process.exit(code);
  },
  (err: Error) => {
    const known = err instanceof ConfigError || err instanceof InstallError;
    console.error(`mcp-gateway: ${known ? err.message : err.stack ?? err.message}`);
    process.exit(1);
  },
);
