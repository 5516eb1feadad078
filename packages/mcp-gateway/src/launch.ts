/**
 * How each configured server is started: the command line and environment of its stdio process
 * (after fetching it, for catalog and GitHub entries), or the address of a remote one. Servers
 * get the gateway's environment (the sandbox's, less the access token) plus their entry's
 * credentials. Reference servers run from the bundles beside the gateway's own (dist/mcp-gateway/servers/),
 * or, when the gateway runs from its sources, from their packages and from src/servers/.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Launch } from './backend.ts';
import type { ServerSpec } from './config.ts';
import { ensureCatalogServer, ensureGithubRepo } from './install.ts';
import type { Log } from './log.ts';
import type { ReferenceName } from './reference.ts';

export interface LaunchContext {
  stateDir: string;
  /** The command that runs Node (paths.ts, nodeCommand). */
  node: string[];
  /** What every server's environment starts from. */
  env: Record<string, string>;
  log: Log;
}

const NPM_REFERENCE: Partial<Record<ReferenceName, string>> = {
  filesystem: '@modelcontextprotocol/server-filesystem',
  memory: '@modelcontextprotocol/server-memory',
  sequentialthinking: '@modelcontextprotocol/server-sequential-thinking',
};

/** The Node arguments that run a reference server. */
function referenceProgram(name: ReferenceName): string[] {
  // The gateway's own script: dist/mcp-gateway/mcp-gateway.mjs beside servers/, or src/main.ts.
  const programDir = dirname(resolve(process.argv[1] ?? fileURLToPath(import.meta.url)));
  const bundled = join(programDir, 'servers', `${name}.mjs`);
  if (existsSync(bundled)) return [bundled];
  const npm = NPM_REFERENCE[name];
  if (npm) {
    const require = createRequire(import.meta.url);
    const manifest = require.resolve(`${npm}/package.json`);
    const { bin } = require(manifest) as { bin: Record<string, string> };
    return [join(dirname(manifest), Object.values(bin)[0])];
  }
  return [...process.execArgv, join(dirname(fileURLToPath(import.meta.url)), 'servers', `${name}-main.ts`)];
}

export async function prepareLaunch(spec: ServerSpec, ctx: LaunchContext): Promise<Launch> {
  const [node, ...nodeArgs] = ctx.node;
  switch (spec.kind) {
    case 'reference': {
      const env = spec.name === 'memory' ? { ...ctx.env, MEMORY_FILE_PATH: join(ctx.stateDir, 'memory.jsonl') } : ctx.env;
      return { kind: 'stdio', command: node, args: [...nodeArgs, ...referenceProgram(spec.name), ...spec.args], env };
    }
    case 'catalog': {
      const env = { ...ctx.env, ...spec.env };
      const program = await ensureCatalogServer(spec.name, spec.server, ctx.stateDir, ctx.log);
      // An npm package's entry is a script for /.svc's Node; a PyPI package's is a program of its venv.
      return spec.server.registry === 'npm' ? { kind: 'stdio', command: node, args: [...nodeArgs, program], env } : { kind: 'stdio', command: program, args: [], env };
    }
    case 'github': {
      const cwd = await ensureGithubRepo(spec, ctx.stateDir, ctx.log);
      return { kind: 'stdio', command: '/bin/sh', args: ['-c', spec.runCmd], env: { ...ctx.env, ...spec.env }, cwd };
    }
    case 'remote':
      return { kind: 'http', url: spec.url, headers: spec.headers };
  }
}
