/**
 * `svc master|api|node-agent|proxy|lifecycle|template-center|egress --config FILE`: one component
 * of the platform in this process, for a cluster (docs/cluster.md). The same keys as `svc up`
 * (the file, then SVC_* variables); it serves until SIGINT or SIGTERM.
 */
import { Command } from 'commander';
import type { ComponentStart } from '@svc/common';

interface ComponentCommand {
  name: string;
  description: string;
  /** Loaded on demand: a command loads only its own component. */
  start: () => Promise<ComponentStart>;
}

const COMPONENTS: ComponentCommand[] = [
  { name: 'master', description: 'run the master (control plane: state, scheduling, nodes)', start: async () => (await import('@svc/master/component')).startMasterComponent },
  { name: 'api', description: 'run an API gateway (the public E2B-compatible API)', start: async () => (await import('@svc/api/component')).startApiComponent },
  { name: 'node-agent', description: "run a node agent (this host's sandboxes; must run as root)", start: async () => (await import('@svc/node-agent/component')).startNodeAgentComponent },
  { name: 'proxy', description: 'run a data-plane proxy (sandbox ports and envd)', start: async () => (await import('@svc/proxy/component')).startProxyComponent },
  { name: 'lifecycle', description: 'run lifecycle replicas (idle timeouts, auto-pause and auto-resume)', start: async () => (await import('@svc/lifecycle/component')).startLifecycleComponent },
  { name: 'template-center', description: 'run the template center (builds templates from images)', start: async () => (await import('@svc/template-center/component')).startTemplateCenterComponent },
  { name: 'egress', description: "run this host's egress proxy (layer-7 rules for its node's sandboxes)", start: async () => (await import('@svc/egress/component')).startEgressComponent },
];

/** The names of the commands that keep serving after their action returns. */
export const COMPONENT_NAMES = COMPONENTS.map((c) => c.name);

export function componentCommands(): Command[] {
  return COMPONENTS.map((c) => {
    const cmd = new Command(c.name)
      .description(`${c.description}; serves until SIGINT or SIGTERM (docs/cluster.md)`)
      .option('--config <file>', 'configuration file (YAML, the keys of svc up); else SVC_CONFIG and SVC_* variables');
    if (c.name === 'lifecycle') cmd.option('--replica <n>', 'run only this replica (0, 1, ...); default: all of lifecycle.replicas');
    return cmd.action(async (flags: { config?: string; replica?: string }) => {
      const { runComponent } = await import('@svc/common');
      const argv = [...(flags.config ? ['--config', flags.config] : []), ...(flags.replica !== undefined ? ['--replica', flags.replica] : [])];
      await runComponent(c.name, await c.start(), { argv });
    });
  });
}
