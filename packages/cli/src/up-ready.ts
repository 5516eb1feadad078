/** What `svc up` leaves for the clients once it is up: endpoint.json, and the `--json` line. */
import { join } from 'node:path';
import { writePrivateFile } from './private-file.ts';
import { dataDirFlag } from './shell-lines.ts';

export interface UpEndpoint { apiUrl: string; apiKey: string; sandboxUrl: string; domain: string; caFile?: string }

/** `<data_dir>/endpoint.json` (0600, replaced whole): what the CLI, `svc env` and the SDK read. */
export function writeEndpointFile(dataDir: string, endpoint: UpEndpoint, e2bEnv: string[]): string {
  const file = join(dataDir, 'endpoint.json');
  writePrivateFile(file, JSON.stringify({ ...endpoint, e2bEnv }, null, 2) + '\n');
  return file;
}

/**
 * The line `svc up --json` prints once up. The admin key only to a terminal, as the text output
 * does: `--json` goes to programs and to logs (systemd's journal, a CI's output), which would keep
 * the key for anyone who reads them; a program reads it from endpoint.json or `svc env --json`.
 */
export function readyJson(endpoint: UpEndpoint, dataDir: string, toTerminal: boolean): string {
  if (toTerminal) return JSON.stringify({ ready: true, ...endpoint }) + '\n';
  const withoutKey: Partial<UpEndpoint> = { ...endpoint };
  delete withoutKey.apiKey;
  const hint = `printed only to a terminal: read apiKey from endpointFile (root's alone), or E2B_API_KEY from \`svc env --json${dataDirFlag(dataDir)}\``;
  return JSON.stringify({ ready: true, ...withoutKey, endpointFile: join(dataDir, 'endpoint.json'), apiKeyHint: hint }) + '\n';
}
