#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# /init of the initramfs scripts/debian-kernel.sh makes for booting a
# distribution kernel with scripts/vm-run.sh (--kernel, --initrd): such a
# kernel has the 9p file system and the virtio drivers as modules, so the
# host's root cannot be its root= as with the test kernel. Busybox's sh:
# loads the modules listed in /modules (in order; no dependencies
# resolved here), mounts the host's root over virtio-9p read-only as
# vm-run.sh's command line describes it, and hands over to the init= of
# that command line (scripts/vm-init.sh) with switch_root. On a failure it
# says why on the console and powers the guest off.
export PATH=/bin

die() {
	echo "rsiw-initrd: $*" >/dev/console
	echo o >/proc/sysrq-trigger
	sleep 30
}

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
while read -r m; do
	insmod "/lib/modules/$m" || echo "rsiw-initrd: insmod $m failed" >/dev/console
done </modules

init="" root=/dev/root opts=ro
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	init=*) init=${arg#init=} ;;
	root=*) root=${arg#root=} ;;
	rootflags=*) opts="ro,${arg#rootflags=}" ;;
	esac
done
[ -n "$init" ] || die "no init= on the kernel command line"
mkdir -p /newroot
# The virtio-9p device shows up once virtio_pci has probed it.
n=0
until mount -t 9p -o "$opts" "$root" /newroot 2>/dev/null; do
	n=$((n + 1))
	[ $n -lt 50 ] || die "cannot mount $root (9p, $opts)"
	sleep 0.1
done
umount /proc /sys /dev
exec switch_root /newroot "$init"
