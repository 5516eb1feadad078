#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 machine with Node 20: Debian packages, npm packages, build.
# Idempotent. Usage: scripts/setup.sh [--test]   (--test also installs what the test suite needs)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=runtime
[ "${1:-}" = "--test" ] && profile=test

if [ "$(id -u)" -eq 0 ]; then
  scripts/install-system-deps.sh "$profile"
  scripts/guest-kernel.sh
elif command -v sudo >/dev/null; then
  sudo scripts/install-system-deps.sh "$profile"
  sudo scripts/guest-kernel.sh
else
  echo "setup: installing Debian packages needs root (or sudo)" >&2; exit 1
fi

node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<18)) { console.error("setup: Node.js >= 20.18 is required, found "+process.versions.node); process.exit(1) }'
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
npm run --silent build
echo "setup: done ($profile)"
