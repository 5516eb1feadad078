/** `svc up`: the whole platform in this process (implemented in ../up.ts). */
import { Command } from 'commander';

export function upCommand(): Command {
  return new Command('up')
    .description('run the whole platform in this process (data dir: --data-dir, SVC_DATA_DIR or ~/.svc)')
    .option('--config <file>', 'configuration file (YAML)')
    .option('--rebuild-base', 'rebuild the default base template')
    .option('--demo', 'once up, create a sandbox, run a command in it, pause, resume and kill it')
    .option('--domain <name>', 'serve sandboxes by host name as <port>-<sandboxID>.<name> (needs wildcard DNS: docs/quickstart.md)')
    .option('--tls', 'with --domain: HTTPS for those names, with a certificate from a local CA made once in the data directory')
    .option('--runtime <kind>', 'what runs sandboxes: auto (microvm where KVM boots a guest, else gvisor), gvisor, microvm, or both with the default first (gvisor,microvm) (docs/runtimes.md)')
    .option('--no-code-interpreter', 'do not build the code-interpreter-v1 template in the background (SVC_CODE_INTERPRETER_TEMPLATE=false)')
    .option('--no-mcp-gateway', 'do not build the mcp-gateway template in the background (SVC_MCP_GATEWAY_TEMPLATE=false)')
    .action(async (flags: { config?: string; rebuildBase?: boolean; demo?: boolean; domain?: string; tls?: boolean; runtime?: string; codeInterpreter?: boolean; mcpGateway?: boolean }, c: Command) => {
      const globals = c.optsWithGlobals() as { dataDir?: string; json?: boolean };
      // Loaded on demand: the platform's modules (databases, runtimes) are heavy, and the
      // other commands should start fast and work without them.
      const { runUp } = await import('../up.ts');
      await runUp({ dataDir: globals.dataDir, config: flags.config, rebuildBase: flags.rebuildBase, demo: flags.demo, json: globals.json, domain: flags.domain, tls: flags.tls, runtime: flags.runtime, ...(flags.codeInterpreter === false ? { codeInterpreter: false } : {}), ...(flags.mcpGateway === false ? { mcpGateway: false } : {}) });
    });
}
