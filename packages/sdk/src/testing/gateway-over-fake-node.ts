/**
 * The real API gateway over a real master over the master's fake node agent
 * (master-over-fake-node), for the SDK's and the CLI's tests of the wire.
 */
import { silentLogger, type SvcConfig } from '@svc/common';
import { startApiGateway } from '@svc/api';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';

export interface GatewayOverFakeNode {
  /** The gateway's URL. */
  url: string;
  apiKey: string;
  /** The master and its fake node, for tests that look behind the API. */
  m: MasterOverFakeNode;
  close(): Promise<void>;
}

export async function startGatewayOverFakeNode(opts: { apiKey: string; configure?: (cfg: SvcConfig) => void }): Promise<GatewayOverFakeNode> {
  const m = await startMasterOverFakeNode((cfg) => {
    cfg.api.api_key = opts.apiKey;
    cfg.sandbox_domain = 'localhost:3002';
    opts.configure?.(cfg);
  });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  return {
    url: gw.url,
    apiKey: opts.apiKey,
    m,
    async close() {
      await gw.close();
      await m.close();
    },
  };
}
