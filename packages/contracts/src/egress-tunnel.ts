import { isIpv4 } from '@svc/common';
import { EgressRuleError, type EgressTunnel } from './egress.ts';

/** RFC 1929 allows 255 bytes for each; E2B's SDK says the same. */
const MAX_CREDENTIAL_BYTES = 255;
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/**
 * A proxy address `host:port`: a host name or an IPv4 address, and a port 1..65535. IPv6 is
 * refused (the egress proxy dials IPv4 only, docs/egress.md "Bring your own proxy").
 */
export function parseProxyAddress(raw: unknown, where: string): { host: string; port: number } {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 300) throw new EgressRuleError(`${where} must be a string host:port, e.g. proxy.example.com:1080`);
  const m = /^([^:\s/@[\]]+):(\d{1,5})$/.exec(raw.trim());
  if (!m) throw new EgressRuleError(`${where} must be host:port (a host name or IPv4 address, then a port), not ${JSON.stringify(raw)}`);
  const host = m[1].toLowerCase();
  const port = Number(m[2]);
  if (port < 1 || port > 65535) throw new EgressRuleError(`${where}: port ${m[2]} is not 1..65535`);
  if (!isIpv4(host) && (/^[\d.]+$/.test(host) || !HOST_NAME.test(host))) throw new EgressRuleError(`${where}: ${JSON.stringify(m[1])} is not a host name or an IPv4 address`);
  return { host, port };
}

/**
 * E2B's `network.egressProxy` `{address, username?, password?}` checked: the address as
 * parseProxyAddress says, credentials strings of at most 255 bytes without line breaks or NUL,
 * a password only with a username. Null and undefined are "no proxy".
 */
export function parseEgressProxy(raw: unknown, where = 'network.egressProxy'): EgressTunnel | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new EgressRuleError(`${where} must be an object {address, username?, password?}`);
  const v = raw as Record<string, unknown>;
  for (const key of Object.keys(v)) {
    if (!['address', 'username', 'password'].includes(key)) throw new EgressRuleError(`${where}.${key} is not a field of egressProxy (address, username, password)`);
  }
  const { host, port } = parseProxyAddress(v.address, `${where}.address`);
  const out: EgressTunnel = { address: `${host}:${port}` };
  const username = credential(v.username, `${where}.username`);
  const password = credential(v.password, `${where}.password`);
  if (password !== undefined && username === undefined) throw new EgressRuleError(`${where}.password needs a username`);
  if (username !== undefined) out.username = username;
  if (password !== undefined) out.password = password;
  return out;
}

function credential(raw: unknown, where: string): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'string') throw new EgressRuleError(`${where} must be a string`);
  if (Buffer.byteLength(raw) > MAX_CREDENTIAL_BYTES) throw new EgressRuleError(`${where} is longer than ${MAX_CREDENTIAL_BYTES} bytes`);
  if (/[\r\n\0]/.test(raw)) throw new EgressRuleError(`${where} holds a line break or NUL`);
  return raw;
}

/** The proxy as reads show it: never its password (E2B's SandboxEgressProxyInfo). */
export function egressProxyInfo(t: EgressTunnel | undefined): { address: string; username?: string } | undefined {
  if (!t) return undefined;
  return { address: t.address, ...(t.username !== undefined ? { username: t.username } : {}) };
}
