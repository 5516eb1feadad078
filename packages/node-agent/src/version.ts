export const NODE_AGENT_VERSION = '0.1.0';

/** envd's version from @svc/envd/version when that module exists, else the floor the e2b SDK needs. */
export async function envdVersion(): Promise<string> {
  try {
    const mod = (await import('@svc/envd/version')) as { ENVD_VERSION?: string };
    return mod.ENVD_VERSION ?? '0.6.4';
  } catch {
    return '0.6.4';
  }
}
