import type { IncomingMessage } from 'node:http';
import { ConnectError } from '../connect/code.ts';
import { readAll } from '../connect/body.ts';
import { HttpError } from './respond.ts';

/**
 * A plain route's small JSON body as an object (an empty body is `{}`): 413 over `maxBytes`,
 * 400 naming the route when it is not JSON or not an object.
 */
export async function readJsonObject(req: IncomingMessage, maxBytes: number, route: string): Promise<Record<string, unknown>> {
  const body = await readAll(req, maxBytes).catch((err: unknown) => {
    // resource_exhausted would be 507 (disk full) on envd's plain routes; an oversized request is 413
    throw (err as ConnectError).code === 'resource_exhausted' ? new HttpError(413, (err as Error).message) : err;
  });
  try {
    const value: unknown = body.length === 0 ? {} : JSON.parse(body.toString('utf8'));
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('expected a JSON object');
    return value as Record<string, unknown>;
  } catch (err) {
    throw new ConnectError('invalid_argument', `invalid ${route} body: ${(err as Error).message}`);
  }
}
