/**
 * `mcp-gateway --config JSON`: E2B's `mcp` option of `Sandbox.create`, an object whose keys are
 * server names (node_modules/e2b: `interface McpServer`, `GitHubMcpServer`). Each key becomes one
 * ServerSpec, in the object's order (which decides who keeps a clashing tool name):
 *   a reference server   `filesystem: { paths: [...] }`, `git: { paths? }`, `memory: {}`, `sequentialthinking: {}`, `time: {}`, `fetch: {}`
 *   a catalog server     `brave: { apiKey }` ... (src/catalog.ts), its fields as environment
 *   a GitHub repository  `'github/<owner>/<repo>': { runCmd, installCmd?, envs? }`
 *   a remote server      any other name with `{ url, headers? }`, proxied over streamable HTTP
 * Anything else is a ConfigError naming it.
 */
import { CATALOG, type CatalogServer } from './catalog.ts';
import { asEntry, ConfigError, describe, envValue, optionalString, optionalStringMap, requiredString, type Entry } from './config-fields.ts';
import { isReferenceName, REFERENCE_NAMES, referenceArgs, type ReferenceName } from './reference.ts';

export type ServerSpec =
  | { kind: 'reference'; name: ReferenceName; args: string[] }
  | { kind: 'catalog'; name: string; server: CatalogServer; env: Record<string, string> }
  | { kind: 'github'; name: string; owner: string; repo: string; runCmd: string; installCmd?: string; env: Record<string, string> }
  | { kind: 'remote'; name: string; url: string; headers: Record<string, string> };

const GITHUB_NAME = /^github\/([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)$/;

/** What the gateway runs, for the unknown-name message and --help. */
export function knownServers(): string {
  return `${REFERENCE_NAMES.join(', ')} (built in, offline), ${Object.keys(CATALOG).join(', ')} (installed at start, which needs internet), ` +
    "'github/<owner>/<repo>' entries { runCmd, installCmd?, envs? } and remote entries { url, headers? }";
}

export function parseConfig(text: string): ServerSpec[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`--config is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`--config must be a JSON object of MCP servers by name, got ${describe(value)}`);
  }
  return Object.entries(value as Record<string, unknown>).map(([name, entry]) => serverSpec(name, entry));
}

function serverSpec(name: string, value: unknown): ServerSpec {
  if (isReferenceName(name)) return { kind: 'reference', name, args: referenceArgs(name, asEntry(name, value)) };
  const catalog = Object.hasOwn(CATALOG, name) ? CATALOG[name] : undefined;
  if (catalog) return { kind: 'catalog', name, server: catalog, env: catalogEnv(name, catalog, asEntry(name, value)) };
  const github = GITHUB_NAME.exec(name);
  if (github) {
    const entry = asEntry(name, value);
    return {
      kind: 'github', name, owner: github[1], repo: github[2],
      runCmd: requiredString(name, entry, 'runCmd', 'the command that starts the stdio server'),
      installCmd: optionalString(name, entry, 'installCmd'),
      env: optionalStringMap(name, entry, 'envs'),
    };
  }
  if (name.startsWith('github/')) throw new ConfigError(`MCP server '${name}': a GitHub entry is named 'github/<owner>/<repo>'`);
  if (typeof value === 'object' && value !== null && 'url' in value) return remoteSpec(name, value as Entry);
  throw new ConfigError(`unknown MCP server '${name}': svc's gateway runs ${knownServers()}`);
}

function catalogEnv(name: string, server: CatalogServer, entry: Entry): Record<string, string> {
  const env: Record<string, string> = {};
  for (const field of server.required) {
    if (entry[field] === undefined || entry[field] === null || entry[field] === '') {
      throw new ConfigError(`MCP server '${name}': '${field}' is required (its ${server.env[field] ?? 'setting'})`);
    }
  }
  for (const [field, variable] of Object.entries(server.env)) {
    if (entry[field] !== undefined && entry[field] !== null) env[variable] = envValue(name, field, entry[field]);
  }
  return env;
}

function remoteSpec(name: string, entry: Entry): ServerSpec {
  const url = requiredString(name, entry, 'url', 'the remote server\'s streamable HTTP address');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`MCP server '${name}': 'url' is not a URL: ${url}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ConfigError(`MCP server '${name}': 'url' must be http or https, got ${parsed.protocol}`);
  return { kind: 'remote', name, url: parsed.href, headers: optionalStringMap(name, entry, 'headers') };
}
