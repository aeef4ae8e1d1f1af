#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# PID 1 of the test VM (see scripts/vm-run.sh and scripts/uml-run.sh). The
# root filesystem is the host's, read-only: everything writable is a tmpfs,
# and the paths the command needs are mounted at their host paths. Runs /tmp/out/cmd.sh,
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

# Kernel command line parameters of ours (uml_out and cpu_mhz come from
# scripts/uml-run.sh).
modroot="" vm_ip="" uml_out="" mhz=""
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	rsiw.modroot=*) modroot=${arg#rsiw.modroot=} ;;
	rsiw.vm_ip=*) vm_ip=${arg#rsiw.vm_ip=} ;;
	rsiw.uml_out=*) uml_out=${arg#rsiw.uml_out=} ;;
	rsiw.cpu_mhz=*) mhz=${arg#rsiw.cpu_mhz=} ;;
	esac
done

# The host root as 9p shows it, taken before the tmpfs mounts below hide
# parts of it, and the output directory with the list of paths the command
# needs at their host paths (scripts/vm-run.sh writes both).
# Under User-Mode Linux (scripts/uml-run.sh) the output directory is a
# hostfs path, given on the command line.
host=/dev/.rsiw/host
mkdir -p $host /dev/.rsiw/out
mount --bind / $host
if [ -n "$uml_out" ]; then
	mount -t hostfs -o "$uml_out" none /dev/.rsiw/out
else
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 rsiwout /dev/.rsiw/out
fi
shares=()
[ -f /dev/.rsiw/out/shares ] && mapfile -t shares </dev/.rsiw/out/shares

# Writable directories, private to the guest. One that is itself a shared
# path (a command run from /tmp) is an overlay: the host's files, read-only
# below, the guest's writes in a tmpfs above.
scratch="/tmp /run /var/tmp /var/lib/nvme /etc/nvme /mnt"
for d in $scratch; do
	[ -d "$d" ] || continue
	for p in "${shares[@]}"; do
		[ "$p" = "$d" ] || continue
		o=/dev/.rsiw/overlay$(echo "$d" | tr / -)
		mkdir -p $o && mount -t tmpfs tmpfs $o && mkdir $o/upper $o/work &&
			chmod 1777 $o/upper &&
			mount -t overlay overlay -o "lowerdir=$host$d,upperdir=$o/upper,workdir=$o/work" "$d" &&
			continue 2
		echo "rsiw-vm: cannot show the host's $d in the guest" >/dev/console
	done
	mount -t tmpfs -o mode=1777 tmpfs "$d"
done
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t configfs configfs /sys/kernel/config 2>/dev/null
mkdir -p /tmp/out /run/netns
mount --move /dev/.rsiw/out /tmp/out

# Every shared path below a guest-private directory: the host's, read-only,
# at the same path (the checkout, the working directory, KDIR, ...). The
# list is sorted, parents first, real paths before the symlinks to them.
covered=()
for p in "${shares[@]}"; do
	case "$p" in /*) ;; *) continue ;; esac
	for c in "${covered[@]}"; do
		case "$p" in "$c" | "$c"/*) continue 2 ;; esac
	done
	for d in $scratch; do
		case "$p" in "$d"/*) ;; *) continue ;; esac
		if [ -L "$host$p" ]; then
			# The link itself (its target is shared too).
			mkdir -p "${p%/*}" && ln -sfn "$(readlink "$host$p")" "$p"
			break
		elif [ -d "$host$p" ]; then
			mkdir -p "$p"
		elif [ -e "$host$p" ]; then
			mkdir -p "${p%/*}" && { [ -e "$p" ] || : >"$p"; }
		else
			break
		fi
		mount --bind "$host$p" "$p" && covered+=("$p")
		break
	done
done
# The output directory at its host path too, writable.
hostout=$(cat /tmp/out/host-path 2>/dev/null)
if [ -n "$hostout" ] && [ "$hostout" != /tmp/out ]; then
	mkdir -p "$hostout" 2>/dev/null
	mount --bind /tmp/out "$hostout"
fi
# UML's /proc/cpuinfo has no "cpu MHz", from which perftest converts its
# cycle counts into time: without it perftest ends with "Can't produce a
# report". The guest's CPUs are the host's (UML runs natively): its
# stanzas get the host's clock, which scripts/uml-run.sh passes.
if [ -n "$mhz" ] && ! grep -q '^cpu MHz' /proc/cpuinfo; then
	sed "/^processor/a cpu MHz\t\t: $mhz" /proc/cpuinfo >/dev/.rsiw/cpuinfo &&
		mount --bind /dev/.rsiw/cpuinfo /proc/cpuinfo
fi
# Files shown in place of others ("SOURCE<TAB>TARGET" lines: the UML build
# of rsiw.ko over the checkout's, scripts/uml-run.sh).
if [ -f /tmp/out/binds ]; then
	while IFS=$'\t' read -r from to; do
		mount --bind "$from" "$to" ||
			echo "rsiw-vm: cannot show $from at $to" >/dev/console
	done </tmp/out/binds
fi
umount -l $host
rmdir $host /dev/.rsiw/out 2>/dev/null

poweroff_now() {
	sync
	echo o >/proc/sysrq-trigger
	sleep 30
}

if [ ! -f /tmp/out/cmd.sh ]; then
	echo "rsiw-vm: no command" >/dev/console
	poweroff_now
fi

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
