import { EgressRuleError, type EgressTunnel } from '@svc/contracts/egress';
import { parseEgressProxy } from '@svc/contracts/egress-tunnel';
/**
 * The master's own check of a create request, before anything is scheduled or started: types
 * and the bounds of docs/api.md "Limits" (SANDBOX_LIMITS), field by field, the message naming
 * the first bad field. The gateway translates E2B's names first; the master trusts no caller.
 */
import { badRequest } from '@svc/common';
import { MASK_REQUEST_HOST_PATTERN } from '@svc/contracts/public-api-schemas';
import { cleanMountPath, mountPathProblem } from '@svc/contracts/volumes';
import { RUNTIME_KINDS, type RuntimeKind } from '@svc/contracts/node-agent';
import { checkLabels } from '@svc/contracts/node-labels';
import { IAM_LIMITS, SANDBOX_LIMITS as L, type CreateSandboxInput, type IamToken, type NetworkConfig, type VolumeMount } from '@svc/contracts/master';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const VOLUME_NAME = /^[a-zA-Z0-9_-]+$/;
const MASK_REQUEST_HOST = new RegExp(MASK_REQUEST_HOST_PATTERN);
// Control characters break headers, logs and shells; ids and names never need them.
const CONTROL = /[\u0000-\u001f\u007f]/;

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

function text(v: unknown, field: string, maxBytes: number, opts: { allowEmpty?: boolean; allowControl?: boolean } = {}): string {
  if (typeof v !== 'string') throw badRequest(`${field} must be a string`);
  if (!opts.allowEmpty && v === '') throw badRequest(`${field} must not be empty`);
  if (bytes(v) > maxBytes) throw badRequest(`${field} is longer than ${maxBytes} bytes`);
  if (opts.allowControl ? v.includes('\0') : CONTROL.test(v)) throw badRequest(`${field} must not contain control characters`);
  return v;
}

function optInt(v: unknown, field: string, min: number, max: number): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw badRequest(`${field} must be an integer`);
  if (v < min || v > max) throw badRequest(`${field} must be from ${min} to ${max} (got ${v})`);
  return v;
}

function optBool(v: unknown, field: string): boolean | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw badRequest(`${field} must be a boolean`);
  return v;
}

function metadataOf(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObj(v)) throw badRequest('metadata must be an object of string values');
  const entries = Object.entries(v);
  if (entries.length > L.metadataEntries) throw badRequest(`metadata has ${entries.length} entries; at most ${L.metadataEntries}`);
  let total = 0;
  for (const [k, val] of entries) {
    text(k, 'metadata key', L.metadataKeyBytes);
    text(val, `metadata.${k}`, L.metadataValueBytes, { allowEmpty: true, allowControl: true });
    total += bytes(k) + bytes(val as string);
  }
  if (total > L.metadataTotalBytes) throw badRequest(`metadata is larger than ${L.metadataTotalBytes} bytes in all`);
  return v as Record<string, string>;
}

function envVarsOf(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObj(v)) throw badRequest('envVars must be an object of string values');
  const entries = Object.entries(v);
  if (entries.length > L.envVarEntries) throw badRequest(`envVars has ${entries.length} entries; at most ${L.envVarEntries}`);
  let total = 0;
  for (const [k, val] of entries) {
    if (bytes(k) > L.envVarNameBytes || !ENV_NAME.test(k)) {
      throw badRequest(`envVars: ${JSON.stringify(k.slice(0, 80))} is not a valid variable name (letters, digits and _, not starting with a digit, at most ${L.envVarNameBytes})`);
    }
    text(val, `envVars.${k}`, L.envVarValueBytes, { allowEmpty: true, allowControl: true });
    total += bytes(k) + bytes(val as string);
  }
  if (total > L.envVarsTotalBytes) throw badRequest(`envVars is larger than ${L.envVarsTotalBytes} bytes in all`);
  return v as Record<string, string>;
}

function addressList(v: unknown, field: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw badRequest(`${field} must be a list of strings`);
  if (v.length > L.networkListEntries) throw badRequest(`${field} has ${v.length} entries; at most ${L.networkListEntries}`);
  return v.map((x, i) => text(x, `${field}[${i}]`, L.networkEntryBytes));
}

/**
 * An allowOut entry wholly inside link-local (169.254.0.0/16) is a 400: cloud metadata services
 * hand out the host's credentials there, and the node's firewall keeps it closed whatever allowOut
 * says (node-agent firewall.ts), so such an entry could only mislead. A wider range is fine: its
 * link-local part stays closed.
 */
function refuseLinkLocal(allowOut: string[]): string[] {
  for (const entry of allowOut) {
    const m = /^169\.254\.\d{1,3}\.\d{1,3}(?:\/(\d{1,2}))?$/.exec(entry.trim());
    if (m && (m[1] === undefined || Number(m[1]) >= 16)) {
      throw badRequest(`network.allowOut: ${entry} is link-local, where cloud metadata services hand out the host's credentials; a sandbox never reaches it`);
    }
  }
  return allowOut;
}

/** A network update as parsed: the whole new egress configuration. */
export interface NetworkUpdate {
  allowInternetAccess?: boolean;
  allowOut: string[];
  denyOut: string[];
  rules?: unknown;
  /** Absent: the update stops tunneling (E2B: the update replaces the whole configuration). */
  egressProxy?: EgressTunnel;
}

/**
 * E2B's updateNetwork body (`PUT /sandboxes/{id}/network`): the whole new egress configuration;
 * a field left out clears it. `allow_internet_access` is E2B's spelling, allowInternetAccess ours.
 */
export function parseNetworkUpdate(body: unknown): NetworkUpdate {
  if (body === undefined || body === null) body = {};
  if (!isObj(body)) throw badRequest('the network update must be an object {allow_internet_access?, allowOut?, denyOut?, rules?, egressProxy?}');
  const allowInternetAccess = optBool(body.allow_internet_access ?? body.allowInternetAccess, 'allow_internet_access');
  const { allowOut, denyOut, rules, egressProxy } = networkOf({ allowOut: body.allowOut, denyOut: body.denyOut, rules: body.rules, egressProxy: body.egressProxy });
  return { ...(allowInternetAccess === undefined ? {} : { allowInternetAccess }), allowOut, denyOut, ...(rules === undefined ? {} : { rules }), ...(egressProxy ? { egressProxy } : {}) };
}

function networkOf(v: unknown): NetworkConfig {
  if (v === undefined || v === null) return { allowOut: [], denyOut: [], allowPublicTraffic: true };
  if (!isObj(v)) throw badRequest('network must be an object');
  const out: NetworkConfig = {
    allowOut: refuseLinkLocal(addressList(v.allowOut, 'network.allowOut')),
    denyOut: addressList(v.denyOut, 'network.denyOut'),
    allowPublicTraffic: optBool(v.allowPublicTraffic, 'network.allowPublicTraffic') ?? true,
  };
  if (v.maskRequestHost !== undefined && v.maskRequestHost !== null) {
    const mask = text(v.maskRequestHost, 'network.maskRequestHost', 255);
    if (!MASK_REQUEST_HOST.test(mask)) throw badRequest('network.maskRequestHost must be a host name or address with an optional port, ${PORT} standing for the port');
    out.maskRequestHost = mask;
  }
  if (v.rules !== undefined && v.rules !== null) {
    if (!Array.isArray(v.rules) && !isObj(v.rules)) throw badRequest('network.rules must be a list (or E2B\'s per-host object)');
    if (bytes(JSON.stringify(v.rules)) > L.networkRulesBytes) throw badRequest(`network.rules is larger than ${L.networkRulesBytes} bytes`);
    out.rules = v.rules;
  }
  try {
    const tunnel = parseEgressProxy(v.egressProxy);
    if (tunnel) out.egressProxy = tunnel;
  } catch (err) {
    if (err instanceof EgressRuleError) throw badRequest(err.message);
    throw err;
  }
  return out;
}

function volumeMountsOf(v: unknown): VolumeMount[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw badRequest('volumeMounts must be a list of {name, path, readOnly?}');
  if (v.length > L.volumeMounts) throw badRequest(`volumeMounts has ${v.length} entries; at most ${L.volumeMounts}`);
  const names = new Set<string>();
  const paths = new Set<string>();
  return v.map((m, i) => {
    if (!isObj(m)) throw badRequest(`volumeMounts[${i}] must be an object {name, path, readOnly?}`);
    const name = text(m.name, `volumeMounts[${i}].name`, L.volumeNameChars);
    if (!VOLUME_NAME.test(name)) throw badRequest(`volumeMounts[${i}].name must match ^[a-zA-Z0-9_-]+$`);
    const given = text(m.path, `volumeMounts[${i}].path`, L.mountPathBytes);
    const problem = mountPathProblem(given);
    if (problem) throw badRequest(`volumeMounts[${i}].path ${problem}`);
    const path = cleanMountPath(given);
    if (names.has(name)) throw badRequest(`volume ${name} is mounted twice; a sandbox may attach a volume only once`);
    if (paths.has(path)) throw badRequest(`two volumes are mounted at ${path}`);
    names.add(name);
    paths.add(path);
    return { name, path, readOnly: optBool(m.readOnly, `volumeMounts[${i}].readOnly`) ?? false };
  });
}

export function checkCreateInput(body: unknown): CreateSandboxInput {
  if (!isObj(body)) throw badRequest('request body must be a JSON object');
  const template = text(body.template, 'templateID', L.templateRefBytes);
  const onTimeout = body.onTimeout ?? 'kill';
  if (onTimeout !== 'kill' && onTimeout !== 'pause') throw badRequest('lifecycle.onTimeout must be kill or pause');
  const autoResume = optBool(body.autoResume, 'lifecycle.autoResume') ?? false;
  if (autoResume && onTimeout !== 'pause') throw badRequest('lifecycle.autoResume needs onTimeout=pause');
  const pauseMemory = optBool(body.pauseMemory, 'pauseMemory') ?? true;
  if (!pauseMemory && autoResume) throw badRequest('autoResume cannot be combined with autoPauseMemory false: a sandbox paused without its memory is resumed by connect, not by traffic');
  const allowInternetAccess = optBool(body.allowInternetAccess, 'allowInternetAccess');
  return {
    template,
    timeout: optInt(body.timeout, 'timeout', -1, L.timeoutSec),
    onTimeout,
    autoResume,
    ...(pauseMemory ? {} : { pauseMemory: false }),
    metadata: metadataOf(body.metadata),
    envVars: envVarsOf(body.envVars),
    secure: optBool(body.secure, 'secure') ?? true,
    ...(allowInternetAccess === undefined ? {} : { allowInternetAccess }),
    network: networkOf(body.network),
    volumeMounts: volumeMountsOf(body.volumeMounts),
    cpuCount: optInt(body.cpuCount, 'cpuCount', 1, L.cpuCount),
    ...(body.runtime === undefined ? {} : { runtime: runtimeOf(body.runtime) }),
    ...(body.nodeSelector === undefined ? {} : { nodeSelector: checkLabels(body.nodeSelector, 'nodeSelector') }),
    memoryMB: optInt(body.memoryMB, 'memoryMB', L.memoryMBMin, L.memoryMBMax),
    ...iamOf(body.iam),
  };
}

/** E2B's iam.tokens: names usable in `${e2b.identity.tokens.NAME}`, each with its audience. */
function iamOf(v: unknown): { iam?: { tokens: Record<string, IamToken> } } {
  if (v === undefined || v === null) return {};
  if (!isObj(v)) throw badRequest('iam must be an object {tokens: {name: {audience, tokenType}}}');
  for (const k of Object.keys(v)) if (k !== 'tokens') throw badRequest(`iam.${k} is not known: iam has tokens only`);
  if (v.tokens === undefined || v.tokens === null) return {};
  if (!isObj(v.tokens)) throw badRequest('iam.tokens must be an object of {audience, tokenType}');
  const entries = Object.entries(v.tokens);
  if (entries.length > IAM_LIMITS.tokens) throw badRequest(`iam.tokens has ${entries.length} tokens; at most ${IAM_LIMITS.tokens}`);
  const tokens: Record<string, IamToken> = {};
  for (const [name, t] of entries) {
    const where = `iam.tokens.${name}`;
    // The name goes into a placeholder that ends at the first '}' (E2B's SDK refuses these too).
    if (!name || /[{}\s\u0000-\u001f\u007f]/.test(name) || bytes(name) > IAM_LIMITS.nameBytes) {
      throw badRequest(`iam token name ${JSON.stringify(name)} must be 1 to ${IAM_LIMITS.nameBytes} bytes without braces, spaces or control characters`);
    }
    if (!isObj(t)) throw badRequest(`${where} must be {audience, tokenType}`);
    for (const k of Object.keys(t)) if (k !== 'audience' && k !== 'tokenType') throw badRequest(`${where}.${k} is not known`);
    const audience = text(t.audience, `${where}.audience`, IAM_LIMITS.audienceBytes);
    if (t.tokenType !== 'JWT-SVID') throw badRequest(`${where}.tokenType must be JWT-SVID (got ${JSON.stringify(t.tokenType)})`);
    tokens[name] = { audience, tokenType: 'JWT-SVID' };
  }
  return entries.length ? { iam: { tokens } } : {};
}

function runtimeOf(v: unknown): RuntimeKind {
  if (!RUNTIME_KINDS.includes(v as RuntimeKind)) throw badRequest(`runtime must be one of ${RUNTIME_KINDS.join(', ')}`);
  return v as RuntimeKind;
}
