/**
 * Where the CLI finds the platform: `--api-url`/`--api-key`/`--sandbox-url`, then
 * SVC_API_URL/SVC_API_KEY/SVC_SANDBOX_URL, then `<data dir>/endpoint.json` written by
 * `svc up`, then the SDK's defaults. The data dir is `--data-dir`, SVC_DATA_DIR or ~/.svc.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ConnectionOpts } from '@svc/sdk';
import { CliError } from './errors.ts';

export interface EndpointFlags {
  apiUrl?: string;
  apiKey?: string;
  sandboxUrl?: string;
  dataDir?: string;
}

interface EndpointFile {
  apiUrl?: string;
  apiKey?: string;
  sandboxUrl?: string;
  /** What the official SDK needs, `NAME=value` each, as `svc up` printed them (`svc env`). */
  e2bEnv?: string[];
}

const ENDPOINT_FILE = 'endpoint.json';

function resolveDataDir(flag?: string): string {
  const dir = flag || process.env.SVC_DATA_DIR || join(homedir(), '.svc');
  return resolve(dir);
}

/** The endpoint `svc up` wrote in the data directory (empty when it never ran there) and its path. */
export function savedEndpoint(dataDirFlag?: string): { path: string; file: EndpointFile } {
  const dataDir = resolveDataDir(dataDirFlag);
  return { path: join(dataDir, ENDPOINT_FILE), file: readEndpointFile(dataDir) };
}

function readEndpointFile(dataDir: string): EndpointFile {
  const path = join(dataDir, ENDPOINT_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return {};
  }
  try {
    const parsed = JSON.parse(text) as EndpointFile;
    return typeof parsed === 'object' && parsed !== null ? parsed : {};
  } catch {
    throw new CliError(`${path} is not valid JSON; remove it or run \`svc up\` again`);
  }
}

const env = (name: string) => process.env[name] || undefined;

export function resolveEndpoint(flags: EndpointFlags): ConnectionOpts {
  let file: EndpointFile | undefined;
  const fromFile = () => (file ??= readEndpointFile(resolveDataDir(flags.dataDir)));
  const pick = (flag: string | undefined, envName: string, key: 'apiUrl' | 'apiKey' | 'sandboxUrl') =>
    flag || env(envName) || fromFile()[key] || undefined;
  const out: ConnectionOpts = {};
  const apiUrl = pick(flags.apiUrl, 'SVC_API_URL', 'apiUrl');
  const apiKey = pick(flags.apiKey, 'SVC_API_KEY', 'apiKey');
  const sandboxUrl = pick(flags.sandboxUrl, 'SVC_SANDBOX_URL', 'sandboxUrl');
  if (apiUrl) out.apiUrl = apiUrl;
  if (apiKey) out.apiKey = apiKey;
  if (sandboxUrl) out.sandboxUrl = sandboxUrl;
  return out;
}
