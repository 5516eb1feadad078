/**
 * One configured server as the gateway holds it: a child process speaking MCP over stdio (or a
 * remote server over streamable HTTP), connected with the SDK's Client, its tools, prompts and
 * resources as last listed (kept current by its list-changed notifications), its stderr logged
 * and its tail kept for failure reports. A server that exits stays listed; calls to it answer why.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Prompt, Resource, ResourceTemplate, Tool } from '@modelcontextprotocol/sdk/types.js';
import { Tail, type Log } from './log.ts';

export type Launch =
  | { kind: 'stdio'; command: string; args: string[]; env: Record<string, string>; cwd?: string }
  | { kind: 'http'; url: string; headers: Record<string, string> };

export type ListKind = 'tools' | 'prompts' | 'resources';

/** How long a server may take to answer `initialize` (a first `npx` or `uv` run can be slow). */
const START_TIMEOUT_MS = 120_000;

export class Backend {
  tools: Tool[] = [];
  prompts: Prompt[] = [];
  resources: Resource[] = [];
  templates: ResourceTemplate[] = [];
  /** Set once the server is gone: why. */
  private gone: string | undefined;
  private closing = false;
  private ready = false;
  private readonly stderr = new Tail();
  private client: Client | undefined;

  constructor(
    readonly name: string,
    private readonly launch: Launch,
    private readonly log: Log,
    private readonly version: string,
    private readonly onListChanged: (kind: ListKind) => void,
  ) {}

  /** The prefix of its tools' names when another server has taken them: the name, in MCP's tool-name characters. */
  get prefix(): string {
    return this.name.replace(/[^A-Za-z0-9_.-]/g, '_');
  }

  get alive(): boolean {
    return this.ready && this.gone === undefined;
  }

  get instructions(): string | undefined {
    return this.client?.getInstructions();
  }

  async start(): Promise<void> {
    const client = new Client({ name: 'svc-mcp-gateway', version: this.version }, {
      capabilities: {},
      listChanged: {
        tools: { onChanged: (err, items) => this.changed('tools', err, () => { this.tools = items ?? []; }) },
        prompts: { onChanged: (err, items) => this.changed('prompts', err, () => { this.prompts = items ?? []; }) },
        resources: { onChanged: (err, items) => this.changed('resources', err, () => { this.resources = items ?? []; }) },
      },
    });
    client.onclose = () => {
      if (this.closing) return;
      this.gone = 'it exited';
      this.log(`[${this.name}] the server exited${this.stderrText()}`);
    };
    client.onerror = (err) => this.log(`[${this.name}] transport error: ${err.message}`);
    this.client = client;
    await client.connect(this.transport(), { timeout: START_TIMEOUT_MS });
    await this.refresh(client);
    this.ready = true;
    const info = client.getServerVersion();
    this.log(`[${this.name}] ready: ${info?.name ?? '?'} ${info?.version ?? ''}, ${this.tools.length} tools, ${this.prompts.length} prompts, ${this.resources.length} resources`);
  }

  private transport(): Transport {
    if (this.launch.kind === 'http') {
      return new StreamableHTTPClientTransport(new URL(this.launch.url), { requestInit: { headers: this.launch.headers } });
    }
    const transport = new StdioClientTransport({ command: this.launch.command, args: this.launch.args, env: this.launch.env, cwd: this.launch.cwd, stderr: 'pipe' });
    let partial = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      this.stderr.push(text);
      const lines = (partial + text).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) this.log(`[${this.name}] ${line}`);
    });
    return transport;
  }

  /** The connected client, or an Error saying why there is none. */
  connected(): Client {
    if (!this.client || !this.ready || this.gone) throw new Error(this.gone ?? 'it has not started');
    return this.client;
  }

  /** Everything the server lists, page after page, for what it says it has. */
  private async refresh(client: Client): Promise<void> {
    const caps = client.getServerCapabilities() ?? {};
    this.tools = caps.tools ? await pages((cursor) => client.listTools({ cursor }), 'tools') : [];
    this.prompts = caps.prompts ? await pages((cursor) => client.listPrompts({ cursor }), 'prompts') : [];
    if (caps.resources) {
      this.resources = await pages((cursor) => client.listResources({ cursor }), 'resources');
      this.templates = await pages<'resourceTemplates', ResourceTemplate>((cursor) => client.listResourceTemplates({ cursor }), 'resourceTemplates').catch((err: Error) => {
        this.log(`[${this.name}] resources/templates/list failed, taking none: ${err.message}`);
        return [];
      });
    }
  }

  private changed(kind: ListKind, err: Error | null, apply: () => void): void {
    if (err) {
      this.log(`[${this.name}] refreshing its ${kind} after a change failed: ${err.message}`);
      return;
    }
    apply();
    this.onListChanged(kind);
  }

  /** Its stderr's last lines, for a message. */
  stderrText(): string {
    const text = this.stderr.toString();
    return text ? `; its last output:\n${text}` : '';
  }

  /** What a failed call answers: the server's name, and why (its exit and last output, or the error). */
  failure(err: unknown): string {
    if (this.gone) return `MCP server '${this.name}' is not running: ${this.gone}${this.stderrText()}`;
    return `MCP server '${this.name}': ${err instanceof Error ? err.message : String(err)}`;
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.client?.close();
  }
}

async function pages<K extends string, T>(list: (cursor?: string) => Promise<{ nextCursor?: string } & { [key in K]: T[] }>, key: K): Promise<T[]> {
  const all: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await list(cursor);
    all.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return all;
}
