#!/usr/bin/env bash
# Installs the microvm driver's guest kernel (docs/runtimes.md, "microvm"): Debian's cloud
# kernel, unpacked from its package (never installed on the host, whose boot it must not touch),
# with the few modules a guest needs, under /var/lib/svc/guest-kernel/<version>/ and a `current`
# link. Idempotent: a version already there is kept. Usage: scripts/guest-kernel.sh [DIR]
set -euo pipefail
root="${1:-${SVC_GUEST_KERNEL_ROOT:-/var/lib/svc/guest-kernel}}"
# The parent is the documented data_dir (/var/lib/svc), which holds the database and every
# sandbox's tokens: made here first, it is made 0700, as svc up makes it (cli/src/data-dir.ts);
# the kernel below it is read by QEMU, as root.
parent=$(dirname "$root")
[ -d "$parent" ] || install -d -m 0700 "$parent"
# Load order matters: each module's dependencies come first.
modules=(virtio_ring virtio virtio_mmio virtio_blk failover net_failover virtio_net overlay fuse virtiofs)

pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ && !found {print $2; found = 1}')
if [ -z "$pkg" ]; then
  if [ -e "$root/current/vmlinuz" ]; then echo "guest kernel: apt knows no linux-image-cloud-amd64; keeping $(readlink "$root/current")"; exit 0; fi
  echo "guest kernel: apt knows no linux-image-cloud-amd64 (run apt-get update)" >&2; exit 1
fi
version=${pkg#linux-image-}
dest="$root/$version"
if [ -e "$dest/vmlinuz" ] && [ -e "$dest/modules/modules.order" ]; then
  ln -sfn "$version" "$root/current"
  echo "guest kernel: $version present"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q "$pkg" >/dev/null 2>&1) || { echo "guest kernel: apt-get download $pkg failed" >&2; exit 1; }
dpkg-deb -x "$work"/*.deb "$work/root"
mkdir -p "$dest.tmp/modules"
cp "$work/root/boot/vmlinuz-$version" "$dest.tmp/vmlinuz"
: >"$dest.tmp/modules/modules.order"
for m in "${modules[@]}"; do
  f=$(find "$work/root/lib/modules/$version" -name "$m.ko" | head -1)
  [ -n "$f" ] || { echo "guest kernel: module $m not in $pkg" >&2; exit 1; }
  cp "$f" "$dest.tmp/modules/$m.ko"
  echo "$m" >>"$dest.tmp/modules/modules.order"
done
rm -rf "$dest"
mv "$dest.tmp" "$dest"
ln -sfn "$version" "$root/current"
echo "guest kernel: installed $version in $dest"
