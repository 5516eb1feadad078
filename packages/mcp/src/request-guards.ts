/**
 * Checks on a request to /mcp before any session sees it: where the API checks no key, that it
 * was made to this machine's own names (DNS rebinding); and that a JSON-RPC batch carries at most
 * one tool call.
 */
import type { IncomingMessage } from 'node:http';
import { foreignRequest, localNames } from '@svc/common';

/** What a refused request is answered. */
export interface Refusal {
  status: number;
  code: number;
  message: string;
}

/** Tool calls one JSON-RPC batch may carry. */
const MAX_TOOL_CALLS_PER_BATCH = 1;

/**
 * Without API keys, anyone who can send a request to the API runs tools, and a web page can: it
 * makes its own host name resolve to 127.0.0.1 (DNS rebinding), and the browser sends its requests
 * to the API under that name. Those are refused here: only the loopback names and `listenHost`
 * (the address the API listens on) are served, and a browser's request from a page of another
 * host (its Origin) is refused too.
 */
export function hostRefusal(req: IncomingMessage, listenHost: string): Refusal | undefined {
  const foreign = foreignRequest(req.headers.host, req.headers.origin, listenHost);
  if (!foreign) return undefined;
  const message = foreign.header === 'Host'
    ? `Invalid Host header ${JSON.stringify(foreign.value)}: without API keys, /mcp answers only requests to ${localNames(listenHost)}`
    : `Invalid Origin header ${JSON.stringify(foreign.value)}: without API keys, /mcp answers no web page of another host`;
  return { status: 403, code: -32000, message };
}

/**
 * The MCP transport runs the calls of a batch (up to 100) at once, each as if it came alone: one
 * request then held a hundred tool calls and their output. The protocol's 2025-06-18 revision has
 * no batches; older clients batch a call with notifications, which stays allowed.
 */
export function batchRefusal(body: unknown): Refusal | undefined {
  if (!Array.isArray(body)) return undefined;
  const calls = body.filter((m) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'tools/call').length;
  if (calls <= MAX_TOOL_CALLS_PER_BATCH) return undefined;
  return {
    status: 400,
    code: -32600,
    message: `Invalid Request: a batch carries ${calls} tools/call requests, and ${MAX_TOOL_CALLS_PER_BATCH} is the most; send them one request each`,
  };
}
