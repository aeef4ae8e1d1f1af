#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# PID 1 of the test VM (see scripts/vm-run.sh). The root filesystem is the
# host's, read-only: everything writable is a tmpfs. Runs /tmp/out/cmd.sh,
# writes its status and the dmesg to /tmp/out, then powers off. It must
# never exit: PID 1 exiting panics the kernel.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp TERM=dumb LANG=C.UTF-8

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
for d in /tmp /run /var/tmp /var/lib/nvme /etc/nvme /mnt; do
	[ -d "$d" ] && mount -t tmpfs -o mode=1777 tmpfs "$d"
done
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t configfs configfs /sys/kernel/config 2>/dev/null
mkdir -p /tmp/out /run/netns
mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 rsiwout /tmp/out

poweroff_now() {
	sync
	echo o >/proc/sysrq-trigger
	sleep 30
}

if [ ! -f /tmp/out/cmd.sh ]; then
	echo "rsiw-vm: no command" >/dev/console
	poweroff_now
fi

# Kernel command line parameters of ours.
modroot=""
vm_ip=""
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	rsiw.modroot=*) modroot=${arg#rsiw.modroot=} ;;
	rsiw.vm_ip=*) vm_ip=${arg#rsiw.vm_ip=} ;;
	esac
done
# The test kernel's own modules: a modprobe wrapper pointing at them, on
# PATH and as the kernel's request_module() helper (so "rdma link add ...
# type siw" loads siw). The host may have no /lib/modules at all, and the
# root is read-only, so nothing is mounted over it.
if [ -n "$modroot" ] && [ -d "$modroot/lib/modules" ]; then
	real_modprobe=$(command -v modprobe)
	mkdir -p /tmp/rsiw-bin
	printf '#!/bin/sh\nexec %s -d %s "$@"\n' "$real_modprobe" "$modroot" >/tmp/rsiw-bin/modprobe
	chmod +x /tmp/rsiw-bin/modprobe
	echo /tmp/rsiw-bin/modprobe >/proc/sys/kernel/modprobe
	export PATH=/tmp/rsiw-bin:$PATH
fi

hostname rsiw-vm
ip link set lo up
if [ -n "$vm_ip" ]; then
	# The virtio NIC: the first interface backed by a (PCI) device.
	nic=""
	for n in /sys/class/net/*; do
		[ -e "$n/device" ] && { nic=${n##*/}; break; }
	done
	ip addr add "$vm_ip" dev "$nic"
	ip link set "$nic" up
fi

echo 8 >/proc/sys/kernel/printk 2>/dev/null
limit=$(cat /tmp/out/guest-timeout 2>/dev/null || echo 570)
echo "rsiw-vm: running command (limit ${limit}s)" >/dev/console
timeout --kill-after=5 "$limit" bash /tmp/out/cmd.sh </dev/null 2>&1 |
	tee /tmp/out/output.log >/dev/console
rc=${PIPESTATUS[0]}
dmesg >/tmp/out/dmesg.txt
echo "$rc" >/tmp/out/status
echo "rsiw-vm: command exited with $rc" >/dev/console
poweroff_now
