/**
 * The guest namespace's anti-spoofing on a real kernel: a namespace of the test's own made ready
 * by ensureGuestNetwork, and "the guest" is this test writing Ethernet frames into its tap (what
 * QEMU does with whatever a guest's root sends). A probe chain after raw priority counts what got
 * past it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { GUEST_GATEWAY, GUEST_MAC, GUEST_TAP, ensureGuestNetwork } from './guest-network.ts';

const isRoot = process.getuid?.() === 0;
const sh = (...args: string[]) => execFileSync(args[0]!, args.slice(1), { encoding: 'utf8' });

/** Writes UDP frames to the gateway into the tap: `count` from base.0.1..., then 1 from the guest's own address. */
const GUEST = `
import fcntl, socket, struct, sys, os
tap = os.open('/dev/net/tun', os.O_RDWR)
fcntl.ioctl(tap, 0x400454ca, struct.pack('16sH', b'${GUEST_TAP}', 0x0002 | 0x1000))
mac = bytes(int(x, 16) for x in '${GUEST_MAC}'.split(':'))
def csum(b):
    s = sum(struct.unpack('!10H', b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
def frame(src, i):
    udp = struct.pack('!HHHH', 40000, 9, 8, 0)
    head = lambda c: struct.pack('!BBHHHBBH4s4s', 0x45, 0, 28, i, 0, 64, 17, c, socket.inet_aton(src), socket.inet_aton('${GUEST_GATEWAY}'))
    ip = head(csum(head(0)))
    return b'\\xff' * 6 + mac + b'\\x08\\x00' + ip + udp
n, base = int(sys.argv[1]), sys.argv[2].split('.')
for i in range(n):
    os.write(tap, frame('%s.%s.%d.%d' % (base[0], base[1], (i >> 8) & 255, (i & 255) or 1), i))
os.write(tap, frame('169.254.77.2', n))
`;

test('a guest\'s packets from any source but its own are dropped at the tap, before connection tracking', { skip: isRoot ? false : 'needs root (nft, network namespaces)' }, async () => {
  const netns = `gnspoof-${process.pid}`;
  try {
    sh('ip', 'netns', 'add', netns);
    sh('ip', '-n', netns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1');
    sh('ip', '-n', netns, 'addr', 'add', '10.253.0.2/30', 'dev', 'eth0');
    sh('ip', '-n', netns, 'link', 'set', 'eth0', 'up');
    await ensureGuestNetwork(`/var/run/netns/${netns}`);
    execFileSync('ip', ['netns', 'exec', netns, 'nft', '-f', '-'], { input: [
      'table ip probe {',
      '  chain after_raw {',
      '    type filter hook prerouting priority -150; policy accept;',
      '    ip saddr 10.99.0.0/16 counter',
      '    ip saddr 169.254.77.2 counter',
      '  }',
      '}',
    ].join('\n') + '\n' });
    sh('ip', 'netns', 'exec', netns, 'python3', '-c', GUEST, '50', '10.99.0.0');
    const counts = [...sh('ip', 'netns', 'exec', netns, 'nft', 'list', 'chain', 'ip', 'probe', 'after_raw').matchAll(/ip saddr (\S+) counter packets (\d+)/g)].map((m) => [m[1], Number(m[2])]);
    assert.deepEqual(counts, [['10.99.0.0/16', 0], ['169.254.77.2', 1]], 'only the guest\'s own address got past raw priority');
  } finally {
    try { execFileSync('ip', ['netns', 'del', netns], { stdio: 'ignore' }); } catch { /* not made: the test failed before it */ }
  }
});
