import { writeFile } from 'node:fs/promises';
import { run } from '../host/exec.ts';
import type { SandboxAddresses } from './address-pool.ts';

export interface SandboxLink {
  netns: string;
  /** /var/run/netns/<name>: what nsenter --net= takes. */
  netnsPath: string;
  hostVeth: string;
}

export const netnsPath = (name: string) => `/var/run/netns/${name}`;

/**
 * A network namespace per sandbox joined to the host by a veth pair: the host side holds
 * the /30's .1, the sandbox side (named eth0 inside) the .2 and a default route to .1.
 */
export async function createSandboxLink(netns: string, hostVeth: string, addr: SandboxAddresses): Promise<SandboxLink> {
  await run('ip', ['-batch', '-'], {
    input: [
      `netns add ${netns}`,
      `link add ${hostVeth} type veth peer name eth0 netns ${netns}`,
      `addr add ${addr.hostAddress}/30 dev ${hostVeth}`,
      `link set ${hostVeth} up`,
    ].join('\n') + '\n',
  });
  // No IPv6 on the host side: the firewall rules are IPv4, so link-local IPv6 must not reach the host.
  await writeFile(`/proc/sys/net/ipv6/conf/${hostVeth}/disable_ipv6`, '1').catch(() => { /* a host without IPv6 has nothing to disable */ });
  await run('ip', ['-n', netns, '-batch', '-'], {
    input: [
      `addr add ${addr.sandboxAddress}/30 dev eth0`,
      'link set eth0 up',
      'link set lo up',
      `route add default via ${addr.hostAddress}`,
    ].join('\n') + '\n',
  });
  return { netns, netnsPath: netnsPath(netns), hostVeth };
}

/** Removes the veth pair and the namespace; either may already be gone. */
export async function destroySandboxLink(netns: string, hostVeth: string): Promise<void> {
  await run('ip', ['link', 'del', hostVeth], { allowFail: true });
  await run('ip', ['netns', 'del', netns], { allowFail: true });
}

export async function listNetns(): Promise<string[]> {
  const { stdout } = await run('ip', ['netns', 'list'], { allowFail: true });
  return stdout.split('\n').map((l) => l.trim().split(/\s+/)[0]).filter(Boolean);
}

export async function listLinks(): Promise<string[]> {
  const { stdout } = await run('ip', ['-o', 'link', 'show'], { allowFail: true });
  const names: string[] = [];
  for (const line of stdout.split('\n')) {
    const m = /^\d+:\s+([^:@\s]+)/.exec(line);
    if (m) names.push(m[1]);
  }
  return names;
}
