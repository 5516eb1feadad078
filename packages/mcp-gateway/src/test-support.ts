/**
 * For the gateway's tests: the program bundled as `npm run build` bundles it, run as the SDK runs
 * it (`mcp-gateway --config`), on a loopback port with a temporary state directory, and an MCP
 * client for it.
 */
import { spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { buildMcpGateway } from '../../../scripts/build-mcp-gateway.mjs';

/** Bundles the gateway into a new temporary directory; answers the directory. */
export async function buildGateway(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-gateway-bundle-'));
  await buildMcpGateway(dir);
  return dir;
}

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

export interface Gateway { bundle: string; stateDir: string; port: number; token: string }

export function gatewayEnv(g: Gateway, extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return { ...process.env, MCP_GATEWAY_STATE_DIR: g.stateDir, MCP_GATEWAY_PORT: String(g.port), MCP_GATEWAY_HOST: '127.0.0.1', GATEWAY_ACCESS_TOKEN: g.token, ...extra };
}

/** Runs `mcp-gateway ARGS` to its exit; `input` is its standard input (none without). `onStart` gets its pid. */
export function runGateway(
  g: Gateway, args: string[], extraEnv: Record<string, string | undefined> = {}, opts: { input?: string; onStart?: (pid: number) => void } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(g.bundle, 'mcp-gateway.mjs'), ...args], {
      env: gatewayEnv(g, extraEnv), stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
    if (child.pid !== undefined) opts.onStart?.(child.pid);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => { stdout += d.toString(); });
    child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export async function connect(g: Gateway, token = g.token): Promise<Client> {
  const client = new Client({ name: 'mcp-gateway-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${g.port}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

/** A tool result's text. */
export function text(result: unknown): string {
  const content = (result as { content: { type: string; text?: string }[] }).content;
  return content.map((c) => c.text ?? '').join('');
}
