import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConnectError } from '../connect/code.ts';
import { readAll } from '../connect/body.ts';
import { HttpError } from './respond.ts';
import { parseRenewal, type AfterRestore } from '../system/after-restore.ts';

/**
 * POST /svc/after-restore `{timeMs, seed}`: the node agent, right after it restored this guest
 * from a saved state, has its clock set and its kernel's random pool reseeded (svc's own route,
 * behind the access token like every route but /init and /health). 204 when done; 400 for a bad
 * body; 500 with the helper's reason when the guest refused.
 */
export async function handleAfterRestore(afterRestore: AfterRestore, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readAll(req, 4096).catch((err: unknown) => {
    throw (err as ConnectError).code === 'resource_exhausted' ? new HttpError(413, (err as Error).message) : err;
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new ConnectError('invalid_argument', `invalid body: ${(err as Error).message}`);
  }
  await afterRestore.renew(parseRenewal(parsed));
  res.writeHead(204, { 'cache-control': 'no-store' });
  res.end();
}
