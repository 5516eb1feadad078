/**
 * Where an MCP session's tool calls go and how it logs. Every call runs with the caller's own
 * connection to the public API, so team scoping, quotas and errors are exactly the API's.
 */
import type { ConnectionOpts } from '@svc/sdk';

export interface McpConnection {
  /** The public API (in the API's own /mcp: its loopback address). */
  apiUrl: string;
  /** The caller's key; over HTTP each request's own key replaces it (McpSession.connection). */
  apiKey?: string;
  /** The data-plane proxy the SDK reaches sandboxes through. */
  sandboxUrl: string;
  /**
   * The data-plane URL users reach ports at, for get_url's scheme and port (an HTTPS listener where
   * one runs); default sandboxUrl.
   */
  publicSandboxUrl?: string;
  /**
   * Headers for the tools' API calls beside the key: the API's own /mcp marks its calls so that
   * they are not counted as failed key checks from its loopback address (api auth.ts).
   */
  apiHeaders?: Record<string, string>;
}

/** What the server logs through: pino's shape, so the API's logger fits; stdio logs to stderr. */
export interface McpLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** The SDK's options for one call with `apiKey`. */
export function sdkOpts(conn: McpConnection, apiKey: string | undefined): ConnectionOpts {
  return { apiUrl: conn.apiUrl, apiKey, sandboxUrl: conn.sandboxUrl, ...(conn.apiHeaders ? { headers: conn.apiHeaders } : {}) };
}
