/** What every command needs from the global options: where to connect and how to print. */
import type { Command } from 'commander';
import type { ConnectionOpts } from '@svc/sdk';
import { resolveEndpoint } from './endpoint.ts';
import { Output } from './output.ts';

export interface GlobalOpts {
  json?: boolean;
  apiUrl?: string;
  apiKey?: string;
  sandboxUrl?: string;
  dataDir?: string;
}

export class Context {
  readonly out: Output;
  private connection?: ConnectionOpts;

  constructor(readonly globals: GlobalOpts) {
    this.out = new Output(!!globals.json);
  }

  /** Resolved on first use, so commands that never call the API never read endpoint.json. */
  get conn(): ConnectionOpts {
    return (this.connection ??= resolveEndpoint(this.globals));
  }
}

export function contextOf(cmd: Command): Context {
  return new Context(cmd.optsWithGlobals() as GlobalOpts);
}
