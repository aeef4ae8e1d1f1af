#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# In Debian 13's own kernel (tests/debian/002, booted by scripts/vm-run.sh
# --kernel --initrd): Debian's RDMA core modules load, rsiw.ko built for
# that kernel (scripts/debian-kernel.sh module) loads beside them, and
# rdma-core's applications and Debian's own NVMe-oF modules run over two
# rsiw devices on a veth pair, through this tree's provider. The only
# taint is the one of an unsigned out-of-tree module; dmesg has no
# warning or oops.
#   debian-boot.sh RELEASE RSIW_KO
set -u
. "$(dirname "$0")/../common/lib.sh"

release=$1
ko=$2
export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"
a=10.96.0.1
b=10.96.0.2
nqn=rsiw-debian-nqn

expect_eq "the guest runs Debian's kernel" "$release" "$(uname -r)"
echo "# $(cat /proc/version)"
# Debian's kernel has no siw (CONFIG_RDMA_SIW is not set): rsiw is the
# only iWARP device there can be.
if modprobe -n siw 2>/dev/null; then
	echo "# Debian's kernel has a siw module"
else
	echo "# Debian's kernel has no siw module"
fi

# The boot's kernel log counts too (no dmesg -C).
for m in ib_core ib_uverbs iw_cm rdma_cm rdma_ucm; do
	check "modprobe $m (Debian's)" modprobe $m
done
# modinfo looks in /lib/modules: ib_core's file as modprobe (rsiw.modroot)
# finds it.
ib_core=$(modprobe --show-depends ib_core | awk '$1 == "insmod" {f = $2} END {print f}')
signer=$(modinfo -F signer "$ib_core" 2>/dev/null)
echo "# ib_core: $ib_core, signer: $signer"
check "Debian's own modules are signed (ib_core)" test -n "$signer"
check "insmod rsiw.ko (built for $release)" insmod "$ko"
check "rsiw's vermagic is the running kernel's" bash -c "modinfo -F vermagic '$ko' | grep -q '^$release '"
# The expected taint: an out-of-tree module (O, 4096) that is not signed
# (E, 8192; Debian's CONFIG_MODULE_SIG without _FORCE loads it).
dmesg | grep -E 'taint|module verification' | sed 's/^/# dmesg: /'
echo "# /proc/sys/kernel/tainted: $(cat /proc/sys/kernel/tainted); rsiw: $(cat /sys/module/rsiw/taint 2>/dev/null)"
expect_eq "the kernel's only taint is rsiw's: out-of-tree, unsigned (O E)" 12288 "$(cat /proc/sys/kernel/tainted)"
expect_eq "rsiw's own taint flags" OE "$(cat /sys/module/rsiw/taint 2>/dev/null)"

setup "veth pair rsiwd0/rsiwd1" local_veth rsiwd0 $a rsiwd1 $b
check "rdma link add rsiw0 on rsiwd0" rdma link add rsiw0 type rsiw netdev rsiwd0
check "rdma link add rsiw1 on rsiwd1" rdma link add rsiw1 type rsiw netdev rsiwd1
rdma link show | sed 's/^/# /'
check "ibv_devinfo: rsiw0 is an iWARP device (this tree's provider)" \
	bash -c 'ibv_devinfo -d rsiw0 | grep -q "transport:.*iWARP"'

# --- rping: Sends and RDMA Read/Write, every payload checked (-V) ---
rping_verified $a $b 20 "rping -V rsiw1 -> rsiw0"

# --- perftest with rdma_cm (-R): RDMA Write bandwidth, 200 x 64 KiB ---
perftest_bw ib_write_bw $a $b rsiw0 rsiw1

# --- NVMe-oF through Debian's nvmet-rdma and nvme-rdma ---
setup "memory-backed null_blk (Debian's)" modprobe null_blk nr_devices=1 memory_backed=1 gb=1 queue_mode=2
check "modprobe nvmet-rdma nvme-rdma (Debian's)" modprobe -a nvmet-rdma nvme-rdma
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
check "nvmet port on rsiw0 ($a)" nvmet_export $nqn /dev/nullb0 $a
check "nvme connect over rsiw (from $b)" nvme_connect $nqn $a --host-traddr=$b
check "namespace appears" wait_for $((10 * TF)) bash -c 'ls /dev/nvme*n1 >/dev/null 2>&1'
dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
if [ -n "$dev" ]; then
	head -c $((16 << 20)) /dev/urandom >/tmp/pattern
	check "write 16 MiB to $dev and read it back (direct)" dd_rates nvme-rdma "$dev" 16
	check "data read back equals data written" cmp /tmp/pattern /tmp/back
fi
check "nvme disconnect" bash -c "nvme disconnect -n $nqn | grep -q 'disconnected 1'"
nvmet_unexport $nqn
check "unload nvme-rdma and nvmet-rdma" modprobe -r nvme-rdma nvmet-rdma

check "rdma link delete rsiw0 rsiw1" bash -c 'rdma link delete rsiw0 && rdma link delete rsiw1'
check "rmmod rsiw" rmmod rsiw
# By name, each: modprobe -r leaves ib_cm and ib_uverbs_support (loaded as
# dependencies) behind otherwise.
check "modprobe -r Debian's RDMA modules after rsiw" \
	modprobe -r rdma_ucm rdma_cm ib_cm iw_cm ib_uverbs ib_uverbs_support ib_core
check "none of them is left" bash -c '! grep -qE "^(rdma_ucm|rdma_cm|ib_cm|iw_cm|ib_uverbs|ib_uverbs_support|ib_core) " /proc/modules'

dmesg >"$OUT/dmesg-debian.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks (Debian's kernel)"
finish
