/**
 * `mcp-gateway pull NAME...`, which the SDK's `Template.addMcpServer(names)` runs at build: the
 * reference servers are in the template already; catalog servers are installed now into the
 * state directory, so that a sandbox of the template starts them without fetching anything.
 */
import { CATALOG, packageSpec } from './catalog.ts';
import { knownServers } from './config.ts';
import { ConfigError } from './config-fields.ts';
import { ensureCatalogServer } from './install.ts';
import { log } from './log.ts';
import { gatewayPaths } from './paths.ts';
import { isReferenceName } from './reference.ts';

export async function pull(names: string[]): Promise<void> {
  if (names.length === 0) throw new ConfigError('pull: name the MCP servers to install, e.g. mcp-gateway pull brave');
  const unknown = names.filter((n) => !isReferenceName(n) && !Object.hasOwn(CATALOG, n));
  if (unknown.length > 0) {
    throw new ConfigError(`pull: unknown MCP server${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `'${n}'`).join(', ')}: svc's gateway runs ${knownServers()}`);
  }
  const { stateDir } = gatewayPaths();
  for (const name of names) {
    if (isReferenceName(name)) {
      console.log(`${name}: built into the gateway (runs offline), nothing to pull`);
      continue;
    }
    const server = CATALOG[name];
    const program = await ensureCatalogServer(name, server, stateDir, log);
    console.log(`${name}: ${packageSpec(server)} installed (${program})`);
  }
}
