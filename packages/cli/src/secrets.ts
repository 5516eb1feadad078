import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { newToken } from '@svc/common';

/** Tokens `svc up` generates once per data directory, so a restart keeps the same API key. */
export interface UpSecrets {
  api_key: string;
  template_callback_token: string;
  proxy_admin_token: string;
}

export function loadOrCreateSecrets(dataDir: string): UpSecrets {
  const file = join(dataDir, 'secrets.json');
  let cur: Partial<UpSecrets> = {};
  if (existsSync(file)) cur = JSON.parse(readFileSync(file, 'utf8'));
  const out: UpSecrets = {
    api_key: cur.api_key || `svc_${newToken()}`,
    template_callback_token: cur.template_callback_token || newToken(),
    proxy_admin_token: cur.proxy_admin_token || newToken(),
  };
  if (JSON.stringify(out) !== JSON.stringify(cur)) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, JSON.stringify(out, null, 2) + '\n', { mode: 0o600 });
    chmodSync(file, 0o600);
  }
  return out;
}
