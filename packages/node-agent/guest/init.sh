#!/bin/busybox sh
# PID 1 of a microvm sandbox's initramfs (docs/runtimes.md, "microvm"). It loads the few
# modules the guest kernel keeps outside itself, finds svc's three disks by their serial
# numbers, mounts the template under the sandbox's writable layer as the root filesystem, puts
# svc's runtime directory at /.svc, configures eth0 from the kernel command line and hands PID 1
# to the sandbox's init (dumb-init, then envd) with the environment the host wrote for it.
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /template /layer /runtime /newroot
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fail() { echo "svc-init: $*" >/dev/console; echo o >/proc/sysrq-trigger; sleep 5; poweroff -f; }

# Modules ship in the order they load (a kernel with everything built in ships none).
for m in $(cat /modules.order 2>/dev/null); do insmod "/modules/$m.ko" || echo "svc-init: module $m did not load" >/dev/console; done

arg() { for w in $(cat /proc/cmdline); do case "$w" in "$1="*) echo "${w#*=}";; esac; done; }

disk() {
  for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40; do
    for s in /sys/block/vd*; do
      [ "$(cat "$s/serial" 2>/dev/null)" = "$1" ] && { echo "/dev/${s##*/}"; return; }
    done
    sleep 0.05
  done
}

template=$(disk svc-template); layer=$(disk svc-layer); runtime=$(disk svc-runtime)
[ -n "$template" ] && [ -n "$layer" ] && [ -n "$runtime" ] || fail "disks missing (template=$template layer=$layer runtime=$runtime; block devices: $(ls /sys/block | tr '\n' ' '))"
mount -t ext4 -o ro,noload "$template" /template || fail "cannot mount the template"
mount -t ext4 -o nodev "$layer" /layer || fail "cannot mount the writable layer"
mount -t overlay overlay -o "lowerdir=/template,upperdir=/layer/upper,workdir=/layer/work" /newroot || fail "cannot mount the root overlay"
mkdir -p /newroot/.svc /newroot/proc /newroot/sys /newroot/dev
# /tmp is the root's own, on the sandbox's disk (docs/runtimes.md, "/tmp"), sticky 1777 as under gVisor.
[ -L /newroot/tmp ] || { mkdir -p /newroot/tmp && chmod 1777 /newroot/tmp; }
mount -t ext4 -o ro,noload "$runtime" /newroot/.svc || fail "cannot mount the runtime disk"
# Volumes over virtiofs, a line each: tag, ro or rw, path (the host enforces ro too).
if [ -f /layer/boot/volumes ]; then
  while read -r tag mode path; do
    mkdir -p "/newroot$path" && mount -t virtiofs -o "$mode" "$tag" "/newroot$path" || fail "cannot mount volume $tag at $path"
  done < /layer/boot/volumes
fi

ip link set lo up
if [ -n "$(arg svc.ip)" ]; then
  ip link set eth0 up && ip addr add "$(arg svc.ip)" dev eth0 && ip route add default via "$(arg svc.gw)" || fail "cannot configure eth0"
fi
hostname "$(cat /layer/boot/hostname 2>/dev/null || echo sandbox)"

mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /newroot/dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 shm /newroot/dev/shm
# The console is the sandbox's log: every user may write to it, as /proc/1/fd/1 under gVisor.
chmod 0622 /newroot/dev/console

[ -f /layer/boot/exec.sh ] || fail "no boot script on the writable layer"
# exec.sh ends in `exec env -i K=V ... switch_root /newroot ARGV...`: PID 1 stays this process.
. /layer/boot/exec.sh
fail "the sandbox's init did not start"
