/**
 * get_url: where a port of a sandbox is reached from outside, through the data-plane proxy:
 * `<scheme>://<port>-<sandboxId>.<sandbox domain>`, the scheme and port of the proxy's public URL.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Sandbox, dataPlaneDomain } from '@svc/sdk';
import { z } from 'zod';
import { textResult } from '../results.ts';
import type { McpSession } from '../session.ts';
import { registerSvcTool } from '../tool-kit.ts';
import { sandboxIdArg } from './sandboxes.ts';

/** The header a private sandbox's ports want its traffic access token in (docs/data-plane.md). */
const TRAFFIC_TOKEN_HEADER = 'e2b-traffic-access-token';

/**
 * The URL of `port`. `domain` is the one the API reported (it may carry a port: `localhost:3002`);
 * without one the proxy's own host and port (the SDK's dataPlaneDomain, as its getHost uses).
 */
export function portUrl(publicSandboxUrl: string, domain: string | undefined, sandboxId: string, port: number): string {
  const proxy = new URL(publicSandboxUrl);
  if (!domain) return `${proxy.protocol}//${port}-${sandboxId}.${dataPlaneDomain(publicSandboxUrl)}`;
  const host = /:\d+$/.test(domain) || !proxy.port ? domain : `${domain}:${proxy.port}`;
  return `${proxy.protocol}//${port}-${sandboxId}.${host}`;
}

export function registerUrlTool(server: McpServer, session: McpSession): void {
  registerSvcTool(server, session, 'get_url', {
    outsideCallLimit: true,
    title: 'Get the URL of a port',
    description: 'Returns the public URL of a TCP port of a sandbox, through the platform\'s proxy, for a web server or API you started in it '
      + '(make it listen on 0.0.0.0, not only 127.0.0.1). Also says which header to send when the sandbox only accepts requests with its traffic token.',
    inputSchema: {
      sandboxId: sandboxIdArg,
      port: z.number().int().min(1).max(65_535).describe('the port a server listens on inside the sandbox'),
    },
    outputSchema: { url: z.string(), headers: z.record(z.string(), z.string()).optional() },
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async (args, call) => {
    const info = await Sandbox.getInfo(args.sandboxId, { ...call.opts, signal: call.signal });
    const url = portUrl(call.session.publicSandboxUrl, info.sandboxDomain, args.sandboxId, args.port);
    const notes: string[] = [];
    let headers: Record<string, string> | undefined;
    if (info.network?.allowPublicTraffic === false) {
      if (info.state === 'running') {
        const token = (await call.session.sandbox(args.sandboxId, call.opts)).trafficAccessToken;
        if (token) {
          headers = { [TRAFFIC_TOKEN_HEADER]: token };
          notes.push(`this sandbox is private: every request must carry the header ${TRAFFIC_TOKEN_HEADER}: ${token} (without it the proxy answers 403)`);
        }
      } else {
        notes.push(`this sandbox is private: requests need its traffic token in the ${TRAFFIC_TOKEN_HEADER} header; call get_url again after resume_sandbox to get it`);
      }
    }
    if (info.state === 'paused') {
      notes.push(info.lifecycle?.autoResume
        ? 'the sandbox is paused; the first request resumes it'
        : 'the sandbox is paused: requests are refused (409) until resume_sandbox');
    }
    return textResult([url, ...notes].join('\n'), { url, ...(headers ? { headers } : {}) });
  });
}
