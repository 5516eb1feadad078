import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildTemplate, type BuildPlan } from '@svc/sdk';
import type { Logger } from '@svc/common';
import { MCP_GATEWAY_LAUNCHER } from '@svc/contracts/mcp-gateway';

/** E2B's name for it: the official SDK's `Sandbox.create({ mcp })` starts sandboxes of `mcp-gateway`. */
const MCP_GATEWAY_TEMPLATE = 'mcp-gateway';

/**
 * The template: `base` with E2B's `mcp-gateway` command on the PATH. The program and the MCP
 * reference servers it runs are svc's bundles under /.svc/mcp-gateway, which every sandbox gets
 * from its node (packages/node-agent/src/runtime/runtime-bundle.ts), so the template holds only
 * the link and the gateway always matches the platform that runs it (docs/mcp.md).
 */
const PLAN: BuildPlan = {
  fromImage: 'e2bdev/base',
  steps: [{
    type: 'RUN',
    args: [`ln -sf ${MCP_GATEWAY_LAUNCHER} /usr/local/bin/mcp-gateway && install -d -m 0700 /etc/mcp-gateway`, 'root'],
  }],
  ignored: [],
};

/**
 * Builds `mcp-gateway` with the template builder on the master's own address, so the operator owns
 * it and every team may start it (docs/security.md, "Public templates"). svc up asks for it once
 * `base` is ready, in the background: the builder's cache makes the build a no-op while `base` is
 * the same, and a create of it meanwhile waits for it (platform-templates.ts in the master).
 */
export async function buildMcpGatewayTemplate(master: { url: string; headers: Record<string, string> }, say: (line: string) => void, logger: Logger, stopping: () => boolean): Promise<void> {
  const contextDir = await mkdtemp(join(tmpdir(), 'svc-mcp-gateway-'));
  const t = Date.now();
  try {
    const built = await buildTemplate(PLAN, MCP_GATEWAY_TEMPLATE, { apiUrl: master.url, headers: master.headers, contextDir, pollMs: 1_000 });
    logger.info({ templateId: built.templateId, buildId: built.buildId, ms: Date.now() - t }, 'mcp-gateway template ready');
    say(`${MCP_GATEWAY_TEMPLATE} template: ready (${Math.round((Date.now() - t) / 1000)} s)`);
  } catch (err) {
    // A stop cuts the build short: nothing to report then.
    if (stopping()) return;
    say(`${MCP_GATEWAY_TEMPLATE} template: ${(err as Error).message}`);
    logger.warn({ err: (err as Error).message }, 'mcp-gateway could not be built; Sandbox.create({ mcp }) fails until it is');
  } finally {
    await rm(contextDir, { recursive: true, force: true });
  }
}
