import { run } from '../host/exec.ts';

/**
 * Forgets the host's connection-tracking entries of a sandbox's address, so that its next packet
 * is decided by the rules in force now (docs/security.md, "Sandbox networks"):
 * - 'all', when the address is freed: an entry outlives the veth, and a UDP flow its far end
 *   kept alive was accepted (and NAT'd) for the next sandbox given the address, whatever that
 *   sandbox's policy (found by a helper reading the node agent as an attacker);
 * - 'outbound', when its rules narrow: `ct state established` is accepted before any rule, so a
 *   connection opened under the old rules went on under the new ones. Connections into the
 *   sandbox (the proxy's to envd) are kept.
 * conntrack exits 1 when no entry matched: that is no failure. What did fail is answered, for the
 * caller to log: a teardown must still free the address (scripts/install-system-deps.sh installs
 * conntrack; a host without it keeps the old behaviour).
 */
export async function forgetConnections(address: string, which: 'all' | 'outbound'): Promise<string | undefined> {
  try {
    await run('conntrack', ['-D', '-f', 'ipv4', '-s', address], { allowFail: true });
    if (which === 'all') await run('conntrack', ['-D', '-f', 'ipv4', '-d', address], { allowFail: true });
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
