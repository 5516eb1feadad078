/** What the fuzzer knows about a route, and the concrete requests it sends. */
import type { Json } from './values.ts';

export type Component = 'api' | 'master' | 'node-agent' | 'proxy-admin' | 'proxy-data' | 'lifecycle' | 'template-center' | 'envd';

/**
 * How a path parameter is filled besides hostile values:
 *  sandbox     the live sandboxes, the killed one, a missing id
 *  deadSandbox the killed one or a missing id (routes that would change a live sandbox behind the master's back)
 *  node        the platform's node or a missing id
 *  bogus       never a real id (a real template or artifact id could delete the base template)
 */
export type ParamKind = 'sandbox' | 'deadSandbox' | 'node' | 'bogus';

export type AuthKind = 'apiKey' | 'callbackToken' | 'adminToken' | 'nodeToken' | 'clusterToken' | 'none';

export interface RouteSpec {
  component: Component;
  method: string;
  /** `:name` marks a parameter. */
  path: string;
  params?: Record<string, ParamKind>;
  /** Base query (unencoded values). */
  query?: Record<string, string>;
  /** Base JSON body; absent: the route reads no body. */
  body?: Json;
  auth: AuthKind;
  /** Largest body the server accepts, in bytes (oversize cases go beyond it). */
  bodyLimit?: number;
  /** envd Connect RPCs: unary (JSON) or streaming (enveloped). */
  connect?: 'unary' | 'server-stream' | 'client-stream';
  /** Random multi-mutation cases (default 8). */
  random?: number;
  /**
   * Routes that create something real (a sandbox): the base body names something missing, and
   * only this many cases apply `patch` (top-level keys) so that they really act.
   */
  live?: { patch: Record<string, Json>; cases: number };
  /** envd's POST /files: the body is a file upload (multipart or raw), not JSON. */
  upload?: boolean;
}

export interface Case {
  id: number;
  component: Component;
  /** METHOD path-template: the line of the summary. */
  route: string;
  method: string;
  /** As sent: encoded, with query. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** What is hostile about this case. */
  note: string;
  port: number;
  /** Bytes written as is on a socket instead of an HTTP request (malformed HTTP). */
  raw?: Buffer;
  /** The answer is a Connect stream (read for a moment, then closed). */
  stream?: boolean;
  /** Error bodies are Connect's `{code: string, message}` instead of `{code: number, message}`. */
  connectErrors?: boolean;
}
