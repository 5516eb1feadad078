/**
 * The firewall's anti-spoofing on a real kernel: a "sandbox" in a network namespace of the
 * test's own, its veth's host side in the host's namespace under a prefix of the test's own
 * (svq), sends UDP from forged sources. None may reach the connection limit's set (which a
 * sandbox filled with forged sources, disabling the limit for every sandbox) or the host.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { Firewall } from './firewall.ts';

const isRoot = process.getuid?.() === 0;
const sh = (...args: string[]) => execFileSync(args[0]!, args.slice(1), { encoding: 'utf8' });

/** Sends `count` UDP packets to dst:9 from sources base.0.1, base.0.2, ... (raw socket: the sandbox's root can). */
const SPOOF = `
import socket, struct, sys
dst, n, base = sys.argv[1], int(sys.argv[2]), sys.argv[3].split('.')
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for i in range(n):
    src = '%s.%s.%d.%d' % (base[0], base[1], (i >> 8) & 255, (i & 255) or 1)
    udp = struct.pack('!HHHH', 40000, 9, 8, 0)
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 28, i, 0, 64, 17, 0, socket.inet_aton(src), socket.inet_aton(dst))
    s.sendto(ip + udp, (dst, 0))
`;
const LEGIT = 'import socket\nfor p in range(41001, 41004):\n  s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("10.252.0.2", p)); s.sendto(b"x", ("10.252.0.1", 9))';

test('forged sources from a sandbox\'s veth are dropped before connection tracking and the connection limit; its own address passes', { skip: isRoot ? false : 'needs root (nft, network namespaces)' }, async () => {
  const table = `svc_fwspoof_${process.pid}`;
  const netns = `fwspoof-${process.pid}`;
  const veth = `svq${process.pid % 100000}`;
  const fw = new Firewall(table, 'svq', '10.252.0.0/24', undefined, async () => {}, 5);
  const sandbox = { instanceId: 'spoof1', hostVeth: veth, sandboxAddress: '10.252.0.2', policy: { allowInternetAccess: false, allowOut: [], denyOut: [], steer: [] } };
  const elements = () => (/elements = \{([^}]*)\}/.exec(sh('nft', 'list', 'set', 'ip', table, 'sandbox_conns'))?.[1] ?? '').split(',').map((e) => e.trim()).filter(Boolean);
  try {
    sh('ip', 'netns', 'add', netns);
    sh('ip', 'link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns);
    sh('ip', 'addr', 'add', '10.252.0.1/30', 'dev', veth);
    sh('ip', 'link', 'set', veth, 'up');
    sh('ip', '-n', netns, 'addr', 'add', '10.252.0.2/30', 'dev', 'eth0');
    sh('ip', '-n', netns, 'link', 'set', 'eth0', 'up');
    sh('ip', '-n', netns, 'route', 'add', 'default', 'via', '10.252.0.1');
    await fw.rebuild([sandbox]);
    const listed = sh('nft', 'list', 'table', 'ip', table);
    const input = /chain input \{[\s\S]*?\n\t\}/.exec(listed)![0];
    const check = input.indexOf('iifname . ip saddr != @sandbox_sources drop');
    assert.ok(check >= 0 && check < input.indexOf('established,related accept'), 'input checks the source before it accepts established flows');

    sh('ip', 'netns', 'exec', netns, 'python3', '-c', SPOOF, '10.252.0.1', '200', '10.99.0.0');
    sh('ip', 'netns', 'exec', netns, 'python3', '-c', LEGIT);
    const seen = elements();
    assert.deepEqual(seen.filter((e) => e.startsWith('10.99.')), [], 'no forged source reached the connection limit');
    assert.ok(seen.some((e) => e.startsWith('10.252.0.2')), 'the sandbox\'s own address is counted');
    assert.equal(sh('conntrack', '-L', '-s', '10.99.0.0/16').trim(), '', 'no forged source is tracked');

    // A removed sandbox's veth has no address left: whatever it sends is dropped.
    await fw.remove(sandbox.instanceId);
    assert.doesNotMatch(sh('nft', 'list', 'set', 'ip', table, 'sandbox_sources'), /10\.252\.0\.2/);
  } finally {
    await fw.drop();
    try { execFileSync('ip', ['netns', 'del', netns], { stdio: 'ignore' }); } catch { /* not made: the test failed before it */ }
    try { execFileSync('conntrack', ['-D', '-s', '10.252.0.0/24'], { stdio: 'ignore' }); } catch { /* none left: conntrack exits 1 */ }
  }
});
