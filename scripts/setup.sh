#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 machine with Node 20: Debian packages, npm packages, build.
# Idempotent. Usage: scripts/setup.sh [--test]   (--test also installs what the test suite needs)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=runtime
[ "${1:-}" = "--test" ] && profile=test

if [ "$(id -u)" -eq 0 ]; then
  as_root() { "$@"; }
elif command -v sudo >/dev/null; then
  as_root() { sudo "$@"; }
else
  echo "setup: installing Debian packages needs root (or sudo)" >&2; exit 1
fi
as_root scripts/install-system-deps.sh "$profile"
# The microvm runtime's guest kernel (docs/runtimes.md): Debian's cloud kernel first, as the
# fallback, then the minimal kernel built from linux-source-6.1 (about 8 minutes on 2 cores,
# once per machine; it boots three times as fast). SVC_GUEST_KERNEL=debian skips the build.
as_root scripts/guest-kernel.sh
if [ "${SVC_GUEST_KERNEL:-minimal}" != debian ]; then
  as_root scripts/guest-kernel-build.sh --make-current \
    || echo "setup: the minimal guest kernel did not build (above); microvm guests boot Debian's kernel" >&2
fi

node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<18)) { console.error("setup: Node.js >= 20.18 is required, found "+process.versions.node); process.exit(1) }'
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
npm run --silent build
echo "setup: done ($profile)"
