import { ENVD_PORT } from '@svc/contracts/envd-port';

/** Start-up configuration of envd, read from its own environment. */
export interface EnvdConfig {
  host: string;
  port: number;
  /** Explicit default user; when unset, `user` if the image has one, else `root`. */
  defaultUser: string | undefined;
  /** Variables every started process receives (envd's environment minus its own settings). */
  sandboxEnv: Record<string, string>;
}

/** Variables that describe envd's own process rather than the sandbox. */
const processLocalVars = new Set(['HOME', 'USER', 'LOGNAME', 'PWD', 'OLDPWD', 'SHLVL', '_']);

export function readConfig(env: NodeJS.ProcessEnv): EnvdConfig {
  const port = Number(env.ENVD_PORT ?? ENVD_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`ENVD_PORT must be a TCP port, got "${env.ENVD_PORT}"`);
  const sandboxEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined || key.startsWith('ENVD_') || key.startsWith('SVC_ENVD_') || processLocalVars.has(key)) continue;
    sandboxEnv[key] = value;
  }
  return {
    host: env.ENVD_HOST || '0.0.0.0',
    port,
    defaultUser: env.ENVD_DEFAULT_USER || undefined,
    sandboxEnv,
  };
}
