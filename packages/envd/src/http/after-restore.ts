import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseRenewal, type AfterRestore } from '../system/after-restore.ts';
import { readJsonObject } from './json-body.ts';

/**
 * POST /svc/after-restore `{timeMs, seed}`: the node agent, right after it restored this guest
 * from a saved state, has its clock set and its kernel's random pool reseeded (svc's own route,
 * behind the access token like every route but /init and /health). 204 when done; 400 for a bad
 * body; 413 over 4 KB; 500 with the helper's reason when the guest refused.
 */
export async function handleAfterRestore(afterRestore: AfterRestore, req: IncomingMessage, res: ServerResponse): Promise<void> {
  await afterRestore.renew(parseRenewal(await readJsonObject(req, 4096, '/svc/after-restore')));
  res.writeHead(204, { 'cache-control': 'no-store' });
  res.end();
}
