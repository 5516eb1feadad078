#!/usr/bin/env bash
# Installs the Debian packages svc needs. Idempotent: packages already present are skipped.
# Usage: scripts/install-system-deps.sh [runtime|microvm|test|bench]   (default: runtime)
#   runtime: what `svc up` needs (gVisor, networking tools, ext4 tools, mmdebstrap for `base`), and
#            where /dev/kvm exists the microvm packages too: `runtime: auto` boots a probe guest
#            there to learn whether KVM works (docs/runtimes.md)
#   microvm: runtime + the microvm runtime's packages (QEMU, busybox-static for its initramfs)
#   test:    microvm + the real servers the tests start (PostgreSQL, MariaDB, Redis, registry, skopeo,
#            Prometheus, which scrapes `svc up` in test/e2e/lifecycle.test.ts), the Jupyter kernel
#            with numpy, pandas and matplotlib the code interpreter tests use, and Chromium, which
#            playwright-core drives through the web console in test/e2e/console.test.ts, and the
#            SOCKS5 (dante) and HTTP CONNECT (squid) proxies of test/e2e/egress-proxy.test.ts
#   bench:   test + the peers of the benchmarks (nginx for bench/nginx-peer.ts)
set -euo pipefail
profile="${1:-runtime}"

runtime_pkgs=(runsc dumb-init gcc libc6-dev openssl iproute2 nftables iptables e2fsprogs util-linux mmdebstrap zstd
  ca-certificates procps psmisc conntrack)
microvm_pkgs=(qemu-system-x86 qemu-utils busybox-static)
test_pkgs=(postgresql mariadb-server redis-server docker-registry skopeo curl prometheus
  apache2-utils python3-ipykernel python3-numpy python3-pandas python3-matplotlib chromium
  dante-server squid)
# The peers benchmarks measure against in the same run (bench/nginx-peer.ts): started by the bench
# from a configuration of its own, never as a service.
bench_pkgs=(nginx)

case "$profile" in runtime|microvm|test|bench) ;; *) echo "usage: $0 [runtime|microvm|test|bench]" >&2; exit 2 ;; esac
want=("${runtime_pkgs[@]}")
if [ "$profile" != runtime ] || [ -e /dev/kvm ]; then want+=("${microvm_pkgs[@]}"); fi
[ "$profile" = "test" ] || [ "$profile" = "bench" ] && want+=("${test_pkgs[@]}")
[ "$profile" = "bench" ] && want+=("${bench_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system packages missing (${missing[*]}); run this script as root" >&2
  exit 1
fi
echo "system packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Servers installed for tests must not start themselves as system services: tests start their own.
# Only the test and bench profiles install servers: the others leave apt's policy as it is (a
# policy of 101 there kept the packages' own services, and any upgraded meanwhile, from
# (re)starting). Ours is marked, so one a killed run left behind (it would keep every later apt
# upgrade from restarting services, sshd's included) is taken back here by any profile, and never
# one of the operator's.
policy=/usr/sbin/policy-rc.d
marker='# svc install-system-deps.sh'
made_policy=0
if [ -e "$policy" ] && grep -qx "$marker" "$policy"; then rm -f "$policy"; fi
if { [ "$profile" = test ] || [ "$profile" = bench ]; } && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n%s\nexit 101\n' "$marker" >"$policy"; chmod +x "$policy"; made_policy=1
fi
trap '[ $made_policy = 1 ] && rm -f "$policy"' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Nor do they start at the next boot: enabled, a rebooted test machine served Prometheus and squid
# on every address. Only the servers this run installed: an operator's own stay as they were.
declare -A boot_units=([postgresql]=postgresql [mariadb-server]=mariadb [redis-server]=redis-server
  [docker-registry]=docker-registry [prometheus]=prometheus [squid]=squid [dante-server]=danted [nginx]=nginx)
for p in "${missing[@]}"; do
  unit=${boot_units[$p]:-}
  [ -n "$unit" ] || continue
  systemctl disable --quiet "$unit.service" 2>/dev/null || echo "system packages: $unit stays enabled at boot (systemctl disable $unit failed)" >&2
done
echo "system packages: done"
