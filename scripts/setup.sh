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
  # sudo resets the environment: the settings the scripts read go along by name.
  as_root() {
    local pass=() v
    for v in SVC_GUEST_KERNEL SVC_GUEST_KERNEL_ROOT SVC_KERNEL_BUILD_JOBS TMPDIR; do
      [ -n "${!v:-}" ] && pass+=("$v=${!v}")
    done
    sudo env "${pass[@]}" "$@"
  }
else
  echo "setup: installing Debian packages needs root (or sudo)" >&2; exit 1
fi
# package.json's engines: the same floor.
node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<19)) { console.error("setup: Node.js >= 20.19 is required, found "+process.versions.node); process.exit(1) }'
# The same Node as root: sudo's secure_path may name another.
node_bin=$(command -v node)
# Background steps end with the script, however it ends.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
# The steps overlap where they can (measured times on 2 cores in docs/quickstart.md): the npm
# packages download while apt installs (npm needs only the machine's Node, make and g++); then the
# native SQLite binding compiles (about a minute, on one core) while `svc prepare` makes the base
# root filesystem with mmdebstrap (the longest step) and runs the host probes, which a first
# `svc up` would otherwise do.
npm_fresh=0
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
    || [ ! -e node_modules/better-sqlite3/build/Release/better_sqlite3.node ]; then
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
  # -O1: SQLite's one translation unit compiles in about 60 s instead of 125 s at the -O3 its gyp
  # file asks for (a later -O wins), and its queries ran as fast here (docs/quickstart.md). Where
  # GitHub answers, prebuild-install fetches the prebuilt binary instead and nothing compiles.
  CFLAGS="${CFLAGS:-} -O1" npm rebuild --loglevel=error better-sqlite3 esbuild >/dev/null &
  rebuild_pid=$!
fi
npm run --silent build
prepare_ok=1
# Not niced: both take about as long, and niced, mmdebstrap became the longer one (measured).
as_root "$node_bin" dist/svc.mjs prepare || prepare_ok=0
if [ $npm_fresh = 1 ]; then
  wait "$rebuild_pid" || { echo "setup: building the native modules failed; run npm rebuild better-sqlite3 to see why" >&2; exit 1; }
fi
[ $prepare_ok = 1 ] || echo "setup: svc prepare failed (above); svc up makes the base root filesystem itself" >&2
# The minimal guest kernel, for the test suite (it runs microvm under TCG) and --microvm: compiled
# from linux-source-6.1, about 8 minutes on 2 cores, once per machine; it boots three times as fast
# as Debian's. SVC_GUEST_KERNEL=debian skips it.
if [ "$profile" != runtime ] && [ "${SVC_GUEST_KERNEL:-minimal}" != debian ]; then
  as_root scripts/guest-kernel-build.sh --make-current \
    || echo "setup: the minimal guest kernel did not build (above); microvm guests boot Debian's kernel" >&2
fi
if [ $prepare_ok = 1 ]; then echo "setup: done ($profile)"; else echo "setup: done ($profile), with the warning above"; fi
