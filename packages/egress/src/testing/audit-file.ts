import { readFile } from 'node:fs/promises';

/**
 * The egress audit log's records, whole lines only: a test may read while the proxy is halfway
 * through writing the last line (seen as "Unterminated string in JSON" on a busy machine).
 */
export async function readAuditRecords(file: string): Promise<Array<Record<string, unknown>>> {
  const text = await readFile(file, 'utf8').catch(() => { /* no line written yet: no file */ return ''; });
  return text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}
