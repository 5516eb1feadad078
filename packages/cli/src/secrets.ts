import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { newToken } from '@svc/common';
import { writePrivateFile } from './private-file.ts';

/** Tokens `svc up` generates once per data directory, so a restart keeps the same API key. */
export interface UpSecrets {
  api_key: string;
  /** Keys an earlier version generated here: still accepted, no longer printed. */
  previous_api_keys?: string[];
  template_callback_token: string;
  proxy_admin_token: string;
  /** The egress proxy's admin API and the master's policy route (egress.admin_token). */
  egress_admin_token: string;
  /** Signs context-file upload URLs of template builds (master.upload_signing_key). */
  upload_signing_key: string;
  /** The node agent's routes (node_agent.token); absent from files written before 2026-11-30. */
  node_agent_token: string;
  /** The masters' and the lifecycle replicas' routes (cluster_token); absent from files written before 2026-11-30. */
  cluster_token: string;
}

/**
 * The official e2b SDK (2.45 and later) refuses a key that is not `e2b_` followed by hex before
 * it sends anything, so keys are minted in that shape (docs/compatibility.md).
 */
export const E2B_KEY_SHAPE = /^e2b_[0-9a-f]+$/;
const newApiKey = () => `e2b_${randomBytes(20).toString('hex')}`;

export function loadOrCreateSecrets(dataDir: string): UpSecrets {
  const file = join(dataDir, 'secrets.json');
  const cur: Partial<UpSecrets> = existsSync(file) ? readSecrets(file) : {};
  const previous = [...(cur.previous_api_keys ?? [])];
  let apiKey = cur.api_key;
  if (apiKey && !E2B_KEY_SHAPE.test(apiKey)) {
    previous.push(apiKey);
    apiKey = undefined;
  }
  const out: UpSecrets = {
    api_key: apiKey || newApiKey(),
    ...(previous.length ? { previous_api_keys: previous } : {}),
    template_callback_token: cur.template_callback_token || newToken(),
    proxy_admin_token: cur.proxy_admin_token || newToken(),
    egress_admin_token: cur.egress_admin_token || newToken(),
    upload_signing_key: cur.upload_signing_key || newToken(),
    node_agent_token: cur.node_agent_token || newToken(),
    cluster_token: cur.cluster_token || newToken(),
  };
  if (JSON.stringify(out) !== JSON.stringify(cur)) {
    mkdirSync(dataDir, { recursive: true });
    // A new file renamed over the old (private-file.ts): a link planted at the name is replaced, never written through.
    writePrivateFile(file, JSON.stringify(out, null, 2) + '\n');
  }
  return out;
}

const LOST = 'deleting it makes a new API key and new cluster tokens, which every client and host of the platform must then be given';

/** The file as written before, or an error that names it and what deleting it would cost. */
function readSecrets(file: string): Partial<UpSecrets> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file} cannot be read as JSON (${(err as Error).message}): restore it from a backup; ${LOST}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error(`${file} must hold a JSON object of svc's keys and tokens: restore it from a backup; ${LOST}`);
  }
  for (const [k, v] of Object.entries(parsed)) {
    const ok = k === 'previous_api_keys' ? Array.isArray(v) && v.every((x) => typeof x === 'string') : typeof v === 'string';
    if (!ok) throw new Error(`${file}: ${k} must be ${k === 'previous_api_keys' ? 'a list of strings' : 'a string'}: restore the file from a backup; ${LOST}`);
  }
  return parsed as Partial<UpSecrets>;
}
