/** Bundles the MCP gateway into outDir (scripts/build-mcp-gateway.mjs). */
export declare function buildMcpGateway(outDir: string, options?: { sourcemap?: boolean | 'linked' }): Promise<void>;
