import type { CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { envdInit } from '../envd-client.ts';
import type { Instance } from './instances.ts';

/**
 * The one way a sandbox gets its identity, started cold, taken from the warm pool or booted
 * again from its files: envd's POST /init with the sandbox's env vars (and E2B's own) and access
 * token (docs/design.md, "Components").
 */
export function personalise(inst: Instance, id: Pick<CreateSandboxOnNode, 'sandboxId' | 'templateId' | 'envVars' | 'envdAccessToken' | 'defaultUser' | 'defaultWorkdir'>): Promise<void> {
  const envVars = { ...id.envVars, E2B_SANDBOX: 'true', E2B_SANDBOX_ID: id.sandboxId, E2B_TEMPLATE_ID: id.templateId };
  // Kept with the record (0600, the agent's state dir): the microvm driver reaches its guest through envd alone.
  inst.record.envdAccessToken = id.envdAccessToken;
  return envdInit(inst.record.address, {
    envVars, accessToken: id.envdAccessToken, timestamp: new Date().toISOString(),
    ...(id.defaultUser ? { defaultUser: id.defaultUser } : {}), ...(id.defaultWorkdir ? { defaultWorkdir: id.defaultWorkdir } : {}),
  });
}
