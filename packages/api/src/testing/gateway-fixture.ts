/**
 * The fixture of the gateway-*.test.ts files: the API gateway in front of a real master over the
 * master's fake node agent, configured with an API key, a previous key, a small body limit,
 * cluster_token between them and, when asked, an operator auth callback.
 */
import { silentLogger } from '@svc/common';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { startApiGateway } from '../index.ts';

export const KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';
export const PREVIOUS_KEY = 'svc_older-shape-key';
/** cluster_token of the master and the gateway: every gateway test goes through it. */
export const CLUSTER_TOKEN = 'gateway-fixture-cluster-token';

/**
 * The API gateway over a master with the fake node agent; `call` sends KEY unless given other
 * headers. `apiKey: ''` leaves the gateway to the callback alone (no key of its own).
 */
export async function platform(opts: { callback?: string; apiKey?: string; maxFailedKeysPerMin?: number } = {}) {
  const { cfg, master, node, templateCenter, close: closeMaster } = await startMasterOverFakeNode((c) => {
    c.api.api_key = opts.apiKey ?? KEY;
    c.api.previous_api_keys = opts.apiKey === '' ? '' : ` ${PREVIOUS_KEY} ,`;
    if (opts.maxFailedKeysPerMin !== undefined) c.api.max_failed_keys_per_min = opts.maxFailedKeysPerMin;
    c.api.max_body_bytes = 4096;
    c.api.auth_callback_url = opts.callback ?? '';
    c.sandbox_domain = 'localhost:3002';
    c.cluster_token = CLUSTER_TOKEN;
  });
  const gw = await startApiGateway(cfg, { logger: silentLogger(), masterUrl: master.url });
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = { 'x-api-key': KEY }) => {
    const res = await fetch(gw.url + path, {
      method, headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  };
  return {
    gw, master, node, templateCenter, call,
    async close() { await gw.close(); await closeMaster(); },
  };
}
