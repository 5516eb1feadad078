import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../host/exec.ts';

/** The guest's eth0: what the sandbox side of the veth held before the guest took it over. */
export interface GuestNetwork {
  /** address/prefix, e.g. 10.11.0.6/30. */
  cidr: string;
  gateway: string;
  mac: string;
}

export const GUEST_TAP = 'tap0';
const BRIDGE = 'br0';

/**
 * Hands the sandbox's address to a guest: inside the sandbox's namespace the veth end (eth0)
 * and a tap device join a bridge and eth0 gives up its address, so the guest owns it and the
 * host side (veth, firewall, egress steering) sees the same address as with gvisor. Kept in
 * `<dir>/network.json` so that a resume or a reboot configures the guest the same way; repeating
 * it is harmless.
 */
export async function ensureGuestNetwork(netnsPath: string, dir: string, instanceId: string): Promise<GuestNetwork> {
  const file = join(dir, 'network.json');
  const kept = existsSync(file) ? JSON.parse(await readFile(file, 'utf8')) as GuestNetwork : undefined;
  const netns = netnsPath.split('/').pop()!;
  let net = kept;
  if (!net) {
    const addr = await run('ip', ['-n', netns, '-4', '-o', 'addr', 'show', 'dev', 'eth0']);
    const cidr = /inet (\d+\.\d+\.\d+\.\d+\/\d+)/.exec(addr.stdout)?.[1];
    const route = await run('ip', ['-n', netns, '-4', 'route', 'show', 'default']);
    const gateway = /via (\d+\.\d+\.\d+\.\d+)/.exec(route.stdout)?.[1];
    if (!cidr || !gateway) throw new Error(`namespace ${netns} has no address or default route on eth0 to give the guest`);
    net = { cidr, gateway, mac: macOf(instanceId) };
    await writeFile(file, JSON.stringify(net) + '\n');
  }
  const links = (await run('ip', ['-n', netns, '-o', 'link', 'show'])).stdout;
  const batch: string[] = [];
  if (!links.includes(` ${BRIDGE}:`)) batch.push(`link add ${BRIDGE} type bridge`);
  if (!links.includes(` ${GUEST_TAP}:`)) batch.push(`tuntap add dev ${GUEST_TAP} mode tap`);
  batch.push(`link set eth0 master ${BRIDGE}`, `link set ${GUEST_TAP} master ${BRIDGE}`, 'addr flush dev eth0',
    'link set eth0 up', `link set ${GUEST_TAP} up`, `link set ${BRIDGE} up`);
  await run('ip', ['-n', netns, '-batch', '-'], { input: batch.join('\n') + '\n' });
  return net;
}

/** A locally administered MAC from the instance id (stable across resumes). */
function macOf(instanceId: string): string {
  let h = 2166136261;
  for (const c of instanceId) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  const b = [0x02, 0x53, (h >>> 24) & 255, (h >>> 16) & 255, (h >>> 8) & 255, h & 255];
  return b.map((x) => x.toString(16).padStart(2, '0')).join(':');
}
