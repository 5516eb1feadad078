/**
 * MCP's reference servers, which ship with the gateway (bundled beside it, see scripts/build-mcp-gateway.mjs)
 * and so run offline: filesystem, memory and sequentialthinking are the npm packages of
 * modelcontextprotocol/servers; git, time and fetch are Python packages upstream, so svc runs its
 * own Node versions of them (src/servers/), with the same tool and argument names.
 */
import { optionalBoolean, optionalString, optionalStringList, requiredStringList, type Entry } from './config-fields.ts';

export const REFERENCE_NAMES = ['filesystem', 'git', 'memory', 'sequentialthinking', 'time', 'fetch'] as const;
export type ReferenceName = (typeof REFERENCE_NAMES)[number];

export function isReferenceName(name: string): name is ReferenceName {
  return (REFERENCE_NAMES as readonly string[]).includes(name);
}

/** The program's arguments for a reference server's config entry (E2B's shapes: `filesystem: { paths }`, `git: { paths }`, the others `{}`). */
export function referenceArgs(name: ReferenceName, entry: Entry): string[] {
  switch (name) {
    case 'filesystem':
      return requiredStringList(name, entry, 'paths', 'the directories the server may use');
    case 'git':
      // Repositories the tools may open: under these paths only; any when absent.
      return optionalStringList(name, entry, 'paths') ?? [];
    case 'time': {
      const tz = optionalString(name, entry, 'localTimezone');
      return tz ? ['--local-timezone', tz] : [];
    }
    case 'fetch': {
      const userAgent = optionalString(name, entry, 'userAgent');
      return [...(userAgent ? ['--user-agent', userAgent] : []), ...(optionalBoolean(name, entry, 'ignoreRobotsTxt') ? ['--ignore-robots-txt'] : [])];
    }
    case 'memory':
    case 'sequentialthinking':
      return [];
  }
}
