import type { IncomingHttpHeaders } from 'node:http';
import { ConnectError } from '../connect/code.ts';

const prefix = 'x-metadata-';
// Limits of E2B's envd, which stores metadata as `user.e2b.<key>` xattrs.
const storedPrefixLength = 'user.e2b.'.length;
const maxKeyLength = 255 - storedPrefixLength;
const maxTotalLength = 4096;
const printable = /^[\x20-\x7e]*$/;

/** `X-Metadata-<key>: <value>` request headers as a map (keys lowercased, first value wins). */
export function metadataFromHeaders(headers: NodeJS.Dict<string[]> | IncomingHttpHeaders): { [key: string]: string } | undefined {
  let metadata: { [key: string]: string } | undefined;
  let total = 0;
  for (const [name, values] of Object.entries(headers)) {
    if (!name.startsWith(prefix) || values === undefined) continue;
    const key = name.slice(prefix.length);
    const value = Array.isArray(values) ? values[0]! : String(values);
    if (key === '') continue;
    if (key.length > maxKeyLength) throw new ConnectError('invalid_argument', `invalid metadata: key "${key}" exceeds ${maxKeyLength} bytes`);
    if (!printable.test(key) || !printable.test(value)) throw new ConnectError('invalid_argument', `invalid metadata: key and value of "${key}" must be printable US-ASCII`);
    total += storedPrefixLength + key.length + value.length;
    metadata ??= {};
    metadata[key] = value;
  }
  if (total > maxTotalLength) throw new ConnectError('invalid_argument', `invalid metadata: total metadata size ${total} exceeds ${maxTotalLength} bytes`);
  return metadata;
}
