import { ENVD_VERSION } from '@svc/contracts/envd-version';

export const NODE_AGENT_VERSION = '0.1.0';

/** The envd version the sandboxes of this node run: the envd bundle is built from the same checkout. */
export async function envdVersion(): Promise<string> {
  return ENVD_VERSION;
}
