#!/usr/bin/env bash
# Builds a minimal guest kernel for the microvm driver (docs/runtimes.md, "microvm") from
# Debian's linux-source-6.1: the package is fetched with `apt-get download` and unpacked with
# `dpkg-deb -x` (never installed), configured as `make tinyconfig` plus the repo's fragment
# packages/node-agent/guest/kernel.config (every `=y` of it checked in the final .config), and
# built as a bzImage with everything built in (no modules). The result goes to
#   <DIR>/custom-<kernel version>-<first 12 hex of the fragment's sha256>/vmlinuz
# with an empty modules/modules.order (nothing for the guest's init to load). Cached: an
# existing vmlinuz there is kept and nothing is built. With --make-current it then points
# <DIR>/current at the result (guests boot it); without, it leaves <DIR>/current alone. Build
# tools missing are installed when run as root.
# Usage: scripts/guest-kernel-build.sh [--make-current] [DIR]   (default: /var/lib/svc/guest-kernel)
#   SVC_KERNEL_BUILD_JOBS sets make's -j (default: the number of CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
make_current=0
[ "${1:-}" = "--make-current" ] && { make_current=1; shift; }
root="${1:-${SVC_GUEST_KERNEL_ROOT:-/var/lib/svc/guest-kernel}}"
fragment="$PWD/packages/node-agent/guest/kernel.config"
pkg=linux-source-6.1
jobs="${SVC_KERNEL_BUILD_JOBS:-$(nproc)}"
build_deps=(make gcc libc6-dev bc flex bison libelf-dev lz4 xz-utils)

[ -f "$fragment" ] || { echo "guest kernel build: no config fragment at $fragment" >&2; exit 1; }
hash=$(sha256sum "$fragment" | cut -c1-12)

# The kernel version is the package's upstream version (6.1.N-R -> 6.1.N), checked after unpacking.
candidate=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
  cached=$(ls -d "$root"/custom-*-"$hash" 2>/dev/null | sort -V | tail -1 || true)
  if [ -n "$cached" ] && [ -e "$cached/vmlinuz" ]; then
    echo "guest kernel build: apt knows no $pkg; keeping $cached/vmlinuz"
    [ $make_current = 1 ] && ln -sfn "$(basename "$cached")" "$root/current"
    exit 0
  fi
  echo "guest kernel build: apt knows no $pkg (run apt-get update)" >&2; exit 1
fi
version=${candidate%-*}
version=${version#*:}
dest="$root/custom-$version-$hash"
if [ -e "$dest/vmlinuz" ]; then
  echo "guest kernel build: $dest/vmlinuz present (cached)"
  [ $make_current = 1 ] && ln -sfn "$(basename "$dest")" "$root/current"
  exit 0
fi

missing=()
for p in "${build_deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "guest kernel build: missing build tools (${missing[*]}); run as root or install them" >&2; exit 1; }
  echo "guest kernel build: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d "${TMPDIR:-/var/tmp}/svc-kernel-build.XXXXXX")
trap 'rm -rf "$work" "$dest.tmp"' EXIT
start=$SECONDS
echo "guest kernel build: fetching $pkg $candidate"
(cd "$work" && apt-get download -q "$pkg=$candidate" >/dev/null 2>&1) || { echo "guest kernel build: apt-get download $pkg failed" >&2; exit 1; }
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/pkg"
tarball="$work/pkg/usr/src/$pkg.tar.xz"
[ -f "$tarball" ] || { echo "guest kernel build: $pkg.tar.xz not in the package" >&2; exit 1; }
echo "guest kernel build: unpacking the source"
tar -xJf "$tarball" -C "$work"
rm -rf "$work/pkg" "$work"/*.deb
src="$work/$pkg"
[ -d "$src" ] || src=$(find "$work" -mindepth 2 -maxdepth 2 -name Makefile -printf '%h\n' -quit)
kmake() { nice -n 10 make -C "$src" -s ARCH=x86_64 KBUILD_BUILD_USER=svc KBUILD_BUILD_HOST=svc "$@"; }
built=$(kmake kernelversion)
[ "$built" = "$version" ] || { echo "guest kernel build: $pkg $candidate holds Linux $built, expected $version" >&2; exit 1; }

echo "guest kernel build: configuring Linux $version (tinyconfig + $(basename "$fragment"))"
log="$work/config.log"
{ kmake tinyconfig && (cd "$src" && ARCH=x86_64 scripts/kconfig/merge_config.sh -m .config "$fragment") && kmake olddefconfig; } >"$log" 2>&1 \
  || { cat "$log" >&2; echo "guest kernel build: configuring failed" >&2; exit 1; }
dropped=()
while IFS= read -r opt; do
  grep -qx "$opt=y" "$src/.config" || dropped+=("$opt ($(grep -E "^(# )?$opt[= ]" "$src/.config" || echo 'absent'))")
done < <(sed -n 's/^\(CONFIG_[A-Za-z0-9_]*\)=y$/\1/p' "$fragment")
if [ ${#dropped[@]} -gt 0 ]; then
  echo "guest kernel build: options of $fragment not =y in the final .config:" >&2
  printf '  %s\n' "${dropped[@]}" >&2
  exit 1
fi
grep -q '^CONFIG_MODULES=y' "$src/.config" && { echo "guest kernel build: the config enables modules; everything must be built in" >&2; exit 1; }

echo "guest kernel build: compiling bzImage (make -j$jobs)"
kmake -j"$jobs" bzImage
# The directory above the kernels (/var/lib/svc by default) is svc up's data directory, which holds
# every sandbox's tokens: made here first, it is made 0700, as svc up and guest-kernel.sh make it
# (cli/src/data-dir.ts); `mkdir -p` made it 0755. The kernel below it is read by QEMU, as root.
parent=$(dirname "$root")
[ -d "$parent" ] || install -d -m 0700 "$parent"
mkdir -p "$dest.tmp/modules"
cp "$src/arch/x86/boot/bzImage" "$dest.tmp/vmlinuz"
cp "$src/.config" "$dest.tmp/config"
: >"$dest.tmp/modules/modules.order"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "guest kernel build: installed Linux $version in $dest/vmlinuz ($(stat -c %s "$dest/vmlinuz") bytes, $((SECONDS - start)) s)"
[ $make_current = 1 ] && ln -sfn "$(basename "$dest")" "$root/current"
exit 0
