/**
 * The tests of a host name shared by the Host (request-target.ts) and the TLS server name
 * (tls-listener.ts), so that the two refuse exactly the same names: its syntax, and the names
 * the system's resolver reads as an IPv4 address other than as a dotted quad.
 */

/** A host name or IPv4 address (lower case, no port, no trailing dot); not an IPv6 address. */
const HOST_NAME = /^[a-z0-9_]([a-z0-9_.-]{0,252})$/;

export function isHostNameSyntax(host: string): boolean {
  return HOST_NAME.test(host) && !host.includes('..');
}

/** Labels that are all numbers as inet_aton reads them (decimal, octal with a leading 0, hex after 0x): getaddrinfo takes such a name as an address. */
const NUMERIC_LABELS = /^(0x[0-9a-f]*|\d+)(\.(0x[0-9a-f]*|\d+))*$/;
/** The one form of an IPv4 address the rules compare: four decimal octets without leading zeros. */
const DOTTED_QUAD = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/**
 * Whether `host` (lower case, no port, no trailing dot) is a name of numbers only that is not a
 * dotted quad: getaddrinfo reads `2130706433`, `0x7f.1` or `127.000.0.01` as an address
 * (inet_aton), which a rule for `127.0.0.1` would not have matched as text. The few of them that
 * are no address either (`1.2.3.4.5`, `256.0.0.1`) are no usable name, so they count too.
 */
export function isIpv4InAnotherForm(host: string): boolean {
  return NUMERIC_LABELS.test(host) && !DOTTED_QUAD.test(host);
}
