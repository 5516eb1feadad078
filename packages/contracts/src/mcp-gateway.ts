/**
 * svc's MCP gateway, the program of the `mcp-gateway` template that the official SDK's
 * `Sandbox.create({ mcp })` runs as `mcp-gateway --config JSON` (packages/mcp-gateway). The node
 * agent puts its directory into every sandbox's read-only /.svc runtime, as it does envd's and
 * the code interpreter's bundles: `npm run build` writes it to dist/mcp-gateway/.
 */

/** Where the node agent puts dist/mcp-gateway/ in every sandbox: the bundle, its servers and the launcher. */
export const MCP_GATEWAY_DIR = '/.svc/mcp-gateway';

/** The launcher (a shell script running the bundle on /.svc's Node), which the template links as /usr/local/bin/mcp-gateway. */
export const MCP_GATEWAY_LAUNCHER = `${MCP_GATEWAY_DIR}/mcp-gateway`;
