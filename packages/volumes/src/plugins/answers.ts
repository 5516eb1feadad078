/**
 * Checks a plugin's answer to a hook against the protocol's limits (docs/volume-plugins.md), the
 * same for both plugin types: the binary's JSON and the gRPC response use the same snake_case
 * fields. A field given as null counts as absent; fields the protocol does not name are ignored.
 */
import { isAbsolute } from 'node:path';
import { VOLUME_LIMITS, type AttachHookOutput, type CreateHookOutput } from '@svc/contracts/volumes';
import { VolumePluginError, type VolumeHookName } from './errors.ts';

export type Answer = Record<string, unknown>;

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

function fail(driver: string, op: VolumeHookName, reason: string): never {
  throw new VolumePluginError(driver, op, `answered ${reason}`);
}

function optionalString(a: Answer, field: string, driver: string, op: VolumeHookName): string {
  const v = a[field];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') fail(driver, op, `${field} of type ${typeof v}; it must be a string`);
  return v;
}

/**
 * The token is the bearer credential of the volume's content API (docs/volume-plugins.md): one
 * short enough to guess is refused, and the create fails. An empty one is no token (the content
 * API then takes the team's key alone).
 */
export function checkCreateAnswer(a: Answer, driver: string): CreateHookOutput {
  const token = optionalString(a, 'token', driver, 'create');
  if (token.length > VOLUME_LIMITS.tokenChars) {
    fail(driver, 'create', `a token of ${token.length} characters; at most ${VOLUME_LIMITS.tokenChars}`);
  }
  const privateData = optionalString(a, 'private_data', driver, 'create');
  if (bytes(privateData) > VOLUME_LIMITS.privateDataBytes) {
    fail(driver, 'create', `private_data of ${bytes(privateData)} bytes; at most ${VOLUME_LIMITS.privateDataBytes}`);
  }
  if (token !== '' && token.length < VOLUME_LIMITS.minTokenChars) {
    // Our words alone (the token is not quoted): the API caller is told why the create failed.
    throw new VolumePluginError(driver, 'create', `answered a token of ${token.length} characters; a volume's token is the credential of its content API and must have at least ${VOLUME_LIMITS.minTokenChars} random characters`, { forCaller: true });
  }
  return { token, privateData };
}

/**
 * host_path: absolute and within the byte limit. Whether it lies inside volume_plugin_base_dir
 * is the node agent's check (packages/node-agent/src/volumes/attachments.ts), which resolves
 * symlinks and detaches what the plugin mounted before it fails the create.
 */
export function checkAttachAnswer(a: Answer, driver: string): AttachHookOutput {
  const hostPath = optionalString(a, 'host_path', driver, 'attach');
  if (hostPath === '') fail(driver, 'attach', 'no host_path');
  if (bytes(hostPath) > VOLUME_LIMITS.hostPathBytes) {
    fail(driver, 'attach', `a host_path of ${bytes(hostPath)} bytes; at most ${VOLUME_LIMITS.hostPathBytes}`);
  }
  if (hostPath.includes('\0')) fail(driver, 'attach', 'a host_path with a NUL character');
  if (!isAbsolute(hostPath)) fail(driver, 'attach', `host_path ${JSON.stringify(hostPath)}, which is not absolute`);
  return { hostPath, metadata: checkMetadata(a.metadata, driver) };
}

function checkMetadata(v: unknown, driver: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) fail(driver, 'attach', 'metadata that is not an object of strings');
  const entries = Object.entries(v as object);
  if (entries.length > VOLUME_LIMITS.metadataEntries) {
    fail(driver, 'attach', `metadata of ${entries.length} entries; at most ${VOLUME_LIMITS.metadataEntries}`);
  }
  for (const [key, value] of entries) {
    if (typeof value !== 'string') fail(driver, 'attach', `metadata ${JSON.stringify(key)} of type ${typeof value}; values must be strings`);
  }
  // fromEntries keeps a key such as "__proto__" as a plain entry
  const metadata = Object.fromEntries(entries) as Record<string, string>;
  const size = bytes(JSON.stringify(metadata));
  if (size > VOLUME_LIMITS.metadataBytes) fail(driver, 'attach', `metadata of ${size} bytes as JSON; at most ${VOLUME_LIMITS.metadataBytes}`);
  return metadata;
}
