import { run } from '../host/exec.ts';

/**
 * A pause drops the TCP connections the sandbox opened; those the host opened to it (the
 * data-plane proxy, envd's clients: from `hostAddress`, its veth peer) and its own loopback ones
 * stay (docs/runtimes.md, the paragraph on pauses under its first table). Runs in the sandbox's
 * namespace on both runtimes:
 *
 * - its sockets to other peers are destroyed (gvisor's, which live in this namespace's
 *   kernel): the process learns on its next read or write, when it runs again;
 * - where conntrack follows the namespace (microvm), its connections' entries are deleted, and
 *   with loose pickup off an untracked packet of one is answered with a TCP reset: a guest's
 *   socket (in the guest's kernel, out of reach) is reset on its next packet, the peer's too.
 */
export async function dropOutboundConnections(netnsPath: string, hostAddress: string): Promise<void> {
  const script = `
ss -K -t -n state established "( not dst $1 and not dst 127.0.0.0/8 and not dst [::1] )" >/dev/null
# Only where conntrack already follows this namespace's connections (a ruleset here uses it:
# microvm's translation). Switched on now, it would take the connections it never saw, inbound
# ones too, for invalid.
[ "$(conntrack -C 2>/dev/null || echo 0)" -gt 0 ] || exit 0
# No output chain: the resets these rules send are themselves untracked, and one there would drop them.
nft -f - <<'EOF'
add table inet svc_pause
flush table inet svc_pause
table inet svc_pause {
  chain input { type filter hook input priority 0; ct state invalid meta l4proto tcp reject with tcp reset; }
  chain forward { type filter hook forward priority 0; ct state invalid meta l4proto tcp reject with tcp reset; }
}
EOF
sysctl -q -w net.netfilter.nf_conntrack_tcp_loose=0 net.netfilter.nf_conntrack_tcp_be_liberal=1
conntrack -L -p tcp 2>/dev/null | awk -v keep="$1" '{
  s = ""; d = ""; sp = ""; dp = ""
  for (i = 1; i <= NF; i++) {
    split($i, kv, "=")
    if (kv[1] == "src" && s == "") s = kv[2]
    else if (kv[1] == "dst" && d == "") d = kv[2]
    else if (kv[1] == "sport" && sp == "") sp = kv[2]
    else if (kv[1] == "dport" && dp == "") dp = kv[2]
  }
  if (s != "" && s != keep && s !~ /^127[.]/) print s, d, sp, dp
}' | while read -r s d sp dp; do
  # An entry may have ended since the listing: nothing left to delete then.
  conntrack -D -p tcp -s "$s" -d "$d" --sport "$sp" --dport "$dp" >/dev/null 2>&1 || true
done
`;
  await run('nsenter', [`--net=${netnsPath}`, 'sh', '-ec', script, 'drop-outbound', hostAddress]);
}
