/**
 * Where `mcp-gateway` takes its config from. The config holds secrets (catalog API keys, a remote
 * server's headers), and a command line is readable by every process of the sandbox in
 * /proc/<pid>/cmdline for as long as the command runs (up to MCP_GATEWAY_START_TIMEOUT, 600 s,
 * while servers install). So besides E2B's `--config '<json>'`, which its SDK runs and so stays,
 * the config may come from a file (`--config-file PATH`) or standard input (`--config -`), and a
 * config given on the command line is wiped from this process's cmdline as soon as it is read.
 */
import { readFile } from 'node:fs/promises';
import { ConfigError } from './config-fields.ts';

/** The most config read from a file or stdin: far more than any config of servers by name. */
const MAX_CONFIG_BYTES = 1024 * 1024;

/** What this process shows in ps and /proc/<pid>/cmdline once a config was given on its command line. */
const HIDDEN_TITLE = 'mcp-gateway --config (hidden)';

/**
 * The config's text for `--config JSON`, `--config=JSON`, `--config -` or `--config-file PATH`
 * (`--config-file=PATH`); undefined when `command` is none of them.
 */
export async function readConfigArg(command: string | undefined, rest: string[], stdin: NodeJS.ReadableStream = process.stdin): Promise<string | undefined> {
  if (command === '--config-file' || command?.startsWith('--config-file=')) {
    const path = command === '--config-file' ? rest[0] : command.slice('--config-file='.length);
    if (!path) throw new ConfigError('--config-file needs the path of a file holding the JSON config of the MCP servers');
    return readConfigFile(path);
  }
  if (command !== '--config' && !command?.startsWith('--config=')) return undefined;
  const text = command === '--config' ? rest[0] : command.slice('--config='.length);
  if (text === undefined) throw new ConfigError('--config needs the JSON config of the MCP servers (or - to read it from standard input)');
  if (text === '-') return readBounded(stdin, 'standard input');
  hideCommandLine();
  return text;
}

async function readConfigFile(path: string): Promise<string> {
  const data = await readFile(path).catch((err: NodeJS.ErrnoException) => {
    throw new ConfigError(`--config-file ${path}: cannot read it (${err.code ?? err.message})`);
  });
  if (data.length > MAX_CONFIG_BYTES) throw new ConfigError(`--config-file ${path}: it is larger than ${MAX_CONFIG_BYTES} bytes, more than a config of MCP servers`);
  return data.toString('utf8');
}

async function readBounded(stream: NodeJS.ReadableStream, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += buf.length;
    if (size > MAX_CONFIG_BYTES) throw new ConfigError(`--config -: ${what} holds more than ${MAX_CONFIG_BYTES} bytes, more than a config of MCP servers`);
    chunks.push(buf);
  }
  if (size === 0) throw new ConfigError(`--config -: ${what} was empty; it should hold the JSON config of the MCP servers`);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Overwrites the process's arguments as /proc/<pid>/cmdline shows them (Node's process.title
 * writes over the memory of argv on Linux), so that the config's secrets are not readable there
 * for the minutes the servers take to start. The shell that ran the command, and the moments
 * before this line runs, are beyond it: callers that can should use --config-file or --config -.
 */
function hideCommandLine(): void {
  process.title = HIDDEN_TITLE;
}
