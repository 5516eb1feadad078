#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 machine with Node 20: Debian packages, npm packages, build.
# Idempotent, and it installs only what the chosen path needs (docs/quickstart.md, "What set-up does"):
#   scripts/setup.sh            what `svc up` needs on this host: gVisor, and where /dev/kvm exists
#                               QEMU with Debian's guest kernel, so `runtime: auto` can probe whether
#                               a KVM guest boots (the minimal guest kernel is built by `svc up`
#                               when the microvm runtime is really chosen)
#   scripts/setup.sh --microvm  also the minimal guest kernel, ahead of `svc up --runtime microvm`
#   scripts/setup.sh --test     what the test suite needs too: its servers, and the microvm runtime
#                               with the minimal kernel (the suite runs microvm under TCG)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=runtime
case "${1:-}" in
  --test) profile=test ;;
  --microvm) profile=microvm ;;
  '') ;;
  *) echo "usage: scripts/setup.sh [--test|--microvm]" >&2; exit 2 ;;
esac

if [ "$(id -u)" -eq 0 ]; then
  as_root() { "$@"; }
elif command -v sudo >/dev/null; then
  as_root() { sudo "$@"; }
else
  echo "setup: installing Debian packages needs root (or sudo)" >&2; exit 1
fi
node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<18)) { console.error("setup: Node.js >= 20.18 is required, found "+process.versions.node); process.exit(1) }'
# The steps overlap where they can (measured times on 2 cores in docs/quickstart.md): the npm
# packages download while apt installs (npm needs only the machine's Node: every native module
# comes prebuilt from the registry, nothing compiles); then `svc prepare` makes the base root
# filesystem with mmdebstrap and runs the host probes, which a first `svc up` would otherwise do.
npm_fresh=0
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm_fresh=1
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error &
  npm_pid=$!
fi
as_root scripts/install-system-deps.sh "$profile"
# The microvm runtime's guest kernel (docs/runtimes.md): Debian's cloud kernel (seconds: unpacked
# from its package), where the runtime can be used or probed.
if [ "$profile" != runtime ] || [ -e /dev/kvm ]; then as_root scripts/guest-kernel.sh; fi
if [ $npm_fresh = 1 ]; then
  wait "$npm_pid" || { echo "setup: npm ci failed (above)" >&2; exit 1; }
  # esbuild's install script only checks its prebuilt binary; it is the one package allowed one
  npm rebuild --loglevel=error esbuild >/dev/null || { echo "setup: esbuild's binary does not run; npm rebuild esbuild shows why" >&2; exit 1; }
fi
npm run --silent build
prepare_ok=1
as_root node dist/svc.mjs prepare || prepare_ok=0
[ $prepare_ok = 1 ] || echo "setup: svc prepare failed (above); svc up makes the base root filesystem itself" >&2
# The minimal guest kernel, for the test suite (it runs microvm under TCG) and --microvm: compiled
# from linux-source-6.1, about 8 minutes on 2 cores, once per machine; it boots three times as fast
# as Debian's. SVC_GUEST_KERNEL=debian skips it.
if [ "$profile" != runtime ] && [ "${SVC_GUEST_KERNEL:-minimal}" != debian ]; then
  as_root scripts/guest-kernel-build.sh --make-current \
    || echo "setup: the minimal guest kernel did not build (above); microvm guests boot Debian's kernel" >&2
fi
echo "setup: done ($profile)"
