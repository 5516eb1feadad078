import { run } from '../../host/exec.ts';

/**
 * Every guest has the same address, gateway and MAC, so a machine saved on one sandbox's
 * network (a template snapshot, a memory snapshot) runs on any other. The sandbox's own
 * address stays on the namespace's eth0, as with gvisor: the namespace translates between the
 * two (DNAT in, SNAT out), and the host side (veth, firewall, egress steering, allowOut and
 * denyOut) sees the sandbox's address as before. Link-local, so no user network collides.
 */
const GUEST_ADDRESS = '169.254.77.2';
export const GUEST_GATEWAY = '169.254.77.1';
export const GUEST_CIDR = `${GUEST_ADDRESS}/30`;
export const GUEST_MAC = '02:53:00:00:00:02';
export const GUEST_TAP = 'tap0';
const NAT_TABLE = 'svc_guest';

/**
 * Makes the namespace ready for a guest: the tap device with the gateway address, forwarding,
 * and, when the namespace has an eth0 with an address (a sandbox's), the translation to it.
 * Repeating it is harmless (a resume or a reboot does).
 */
export async function ensureGuestNetwork(netnsPath: string): Promise<void> {
  const netns = netnsPath.split('/').pop()!;
  const links = (await run('ip', ['-n', netns, '-o', 'link', 'show'])).stdout;
  const addrs = (await run('ip', ['-n', netns, '-4', '-o', 'addr', 'show'])).stdout;
  const batch: string[] = [];
  if (!links.includes(` ${GUEST_TAP}:`)) batch.push(`tuntap add dev ${GUEST_TAP} mode tap`);
  if (!addrs.includes(`inet ${GUEST_GATEWAY}/`)) batch.push(`addr add ${GUEST_GATEWAY}/30 dev ${GUEST_TAP}`);
  batch.push(`link set ${GUEST_TAP} up`, 'link set lo up');
  await run('ip', ['-n', netns, '-batch', '-'], { input: batch.join('\n') + '\n' });
  await run('nsenter', [`--net=${netnsPath}`, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
  const sandboxAddress = /\d+: eth0\s+inet (\d+\.\d+\.\d+\.\d+)\//.exec(addrs)?.[1];
  await run('nsenter', [`--net=${netnsPath}`, 'nft', '-f', '-'], { input: guestRules(sandboxAddress).join('\n') + '\n' });
}

/**
 * The namespace's table: the guest's packets from any source but its own address dropped (its
 * root can forge them on the tap, and they went out eth0 with the forged source: the host's own
 * check, firewall.ts antispoof, holds the line there, this one keeps them out of the namespace's
 * connection tracking too); then, for a sandbox's namespace, the translation to its address.
 */
function guestRules(sandboxAddress: string | undefined): string[] {
  const rules = [
    `table ip ${NAT_TABLE}`,
    `delete table ip ${NAT_TABLE}`,
    `table ip ${NAT_TABLE} {`,
    '  chain antispoof {',
    '    type filter hook prerouting priority raw; policy accept;',
    `    iifname "${GUEST_TAP}" ip saddr != ${GUEST_ADDRESS} drop`,
    '  }',
  ];
  if (!sandboxAddress) return [...rules, '}'];
  return [
    ...rules,
    '  chain pre {',
    '    type nat hook prerouting priority dstnat; policy accept;',
    `    iifname "eth0" ip daddr ${sandboxAddress} dnat to ${GUEST_ADDRESS}`,
    '  }',
    '  chain post {',
    '    type nat hook postrouting priority srcnat; policy accept;',
    `    oifname "eth0" ip saddr ${GUEST_ADDRESS} snat to ${sandboxAddress}`,
    '  }',
    '}',
  ];
}
