#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# RDMA Commit into an emulated NVDIMM (QEMU -device nvdimm, an ACPI NFIT
# region backed by a host file), not memmap= RAM. Run it with
#   scripts/vm-run.sh --nvdimm 256M --append kunit.filter_glob=rsiw_flush \
#       -- tests/commit/nvdimm.sh
# and, after the VM, tests/commit/nvdimm-image.sh OUT-DIR on the host.
# 1. The region is the NFIT's (ndbus provider ACPI.NFIT), one namespace.
# 2. fs-DAX: ext4 on an fsdax namespace mounted -o dax=always;
#    rsiw-flush-check (rdma-core 55, tests/progs/rdma-core-55/) maps a
#    file there with MAP_SYNC and checks that no MR can cover it
#    (EOPNOTSUPP).
# 3. device-DAX namespace: rsiw-flush-check --dax /dev/dax0.0 registers
#    its first 2 MiB with IBV_ACCESS_FLUSH_PERSISTENT, writes and flushes
#    "rsiw-user-flush\n" into it with ibv_wr_flush; a new process then maps
#    the device and compares. rsiw's provider posts a Flush
#    (IBV_QP_EX_WITH_FLUSH): its exit 77 ("this provider cannot post a
#    Flush") is a failure here, as any other non-zero exit.
# 4. Kernel consumer on a fresh fsdax namespace: loading rsiw runs the
#    rsiw_flush KUnit suite with kunit_pmem_dev=/dev/pmem0, whose pmem case
#    RDMA-Writes 256 KiB of "rsiw-pmem-flush\n" into the device's DAX
#    mapping and commits it (IB_WR_FLUSH to an IB_ACCESS_FLUSH_PERSISTENT
#    MR). After rmmod the bytes are read back through the pmem block
#    device (O_DIRECT, then buffered after dropping the caches): write,
#    flush, reboot-free read back.
# Both patterns stay in the NVDIMM: devdax (map=dev) keeps its struct
# pages and data past the first 6 MiB of the namespace, and step 4 writes
# only the fsdax info block and the start of /dev/pmem0 (at 2 MiB, map=mem),
# so the host finds both in the backing file (tests/commit/nvdimm-image.sh).
# Needs: a kernel with CONFIG_ACPI_NFIT, the test module (make test),
# scripts/build-rdma-core.sh 55 (rsiw's provider in its tree) and
# `make -C tests/progs RDMA_CORE=<prefix>`.
set -u
. "$(dirname "$0")/../common/lib.sh"

len=$((256 * 1024))   # PMEM_LEN in rust/selftest/flush.rs
dmesg -C

# ---- 1. the NFIT region ----
# What QEMU gives this guest, not rsiw: setup (the script stops without it).
setup "an nd bus from the ACPI NFIT" grep -qx ACPI.NFIT /sys/bus/nd/devices/ndbus0/provider
ndctl list -RN >"$OUT/ndctl-before.json" 2>&1
sed 's/^/#   /' "$OUT/ndctl-before.json"
setup "region0 is a pmem region" grep -q '"type":"pmem"' "$OUT/ndctl-before.json"
setup "with namespace0.0" test -e /sys/bus/nd/devices/region0/namespace0.0
setup "no legacy (memmap=) pmem in this guest" test ! -e /sys/bus/nd/devices/ndbus1

# fsdax NAME: namespace0.0 (re)made fsdax, /dev/pmem0 back, DAX-capable.
fsdax() {
	# Setup too (libnvdimm's, not rsiw's). 10 s: the namespace's block
	# device appears within a second on the lean kernel; TF for the
	# debug one.
	ndctl create-namespace -f -e namespace0.0 -m fsdax --map=mem >"$OUT/ndctl-$1.json" 2>&1
	local rc=$?
	sed 's/^/#   /' "$OUT/ndctl-$1.json"
	setup "ndctl makes namespace0.0 fsdax ($1)" test "$rc" = 0
	setup "/dev/pmem0 is there" wait_for $((10 * TF)) test -b /dev/pmem0
	setup "/dev/pmem0 supports DAX" test "$(cat /sys/block/pmem0/queue/dax 2>/dev/null)" = 1
	setup "/dev/pmem0 sits on the NFIT region" \
		sh -c 'readlink -f /sys/block/pmem0 | grep -q "/ndbus0/region0/"'
}

# ---- the userspace ends: two rsiw devices on a veth pair (userspace.sh) ----
a=10.96.0.1
b=10.96.0.2
setup "veth pair rsiwn0/rsiwn1" local_veth rsiwn0 $a rsiwn1 $b
ulimit -c unlimited
echo "$OUT/core.%e.%p" >/proc/sys/kernel/core_pattern
have_check=0
# The prefix's libibverbs finds its provider in the prefix's etc/libibverbs.d.
if rdma_core_find 55; then
	have_check=1
	progs=$RC_PROGS
	unset RDMAV_DRIVERS
else
	fail "rsiw-flush-check for rdma-core 55 not built: $RC_WHY"
fi

# rsiw_up WHAT: rsiw loaded (no KUnit pmem device), rsiw0/rsiw1 on the
# veths (setup; WHAT says for which step).
rsiw_up() {
	setup "insmod rsiw.ko ($1)" insmod "$RSIW_ROOT/rsiw.ko"
	setup "rdma link add rsiw0 on rsiwn0, rsiw1 on rsiwn1 ($1)" \
		bash -c 'rdma link add rsiw0 type rsiw netdev rsiwn0 && rdma link add rsiw1 type rsiw netdev rsiwn1'
}

# flush_check NAME ARGS...: runs rsiw-flush-check; its lines go to the log
# with the prefix NAME; sets $frc to its exit status.
flush_check() {
	local name=$1
	shift
	timeout 120 "$progs/rsiw-flush-check" $a $b "$@" >"$OUT/$name.txt" 2>&1
	frc=$?
	sed -n "s/^\(not \)\{0,1\}ok - /$name: &/p; s/^skip - /# $name: skip - /p" "$OUT/$name.txt"
}

# ---- 2. fs-DAX: ext4 -o dax=always ----
fsdax fs
setup "mkfs.ext4 on /dev/pmem0" mkfs.ext4 -q -F -b 4096 /dev/pmem0
mkdir -p /mnt/pmem
setup "mount -o dax=always" mount -o dax=always /dev/pmem0 /mnt/pmem
setup "the mount is DAX" grep -Eq '^/dev/pmem0 /mnt/pmem ext4 .*dax' /proc/mounts
if [ "$have_check" = 1 ]; then
	rsiw_up fs-DAX
	flush_check fsdax-check --dax /mnt/pmem/target
	# 77 is "the provider cannot post a Flush": it can, so that is a
	# regression, as is any other non-zero exit.
	expect_eq "rsiw-flush-check on fs-DAX: every check passed, the Flushes posted (exit 0)" 0 "$frc"
	check "it says no MR can cover fs-DAX pages" \
		grep -q '^ok - an fs-DAX file.s pages are not pinned for an MR: EOPNOTSUPP' "$OUT/fsdax-check.txt"
	check "rmmod rsiw (after fs-DAX)" rmmod rsiw
fi
echo "# umount /mnt/pmem: $(umount /mnt/pmem 2>&1 && echo "done")"

# ---- 3. device-DAX ----
ndctl create-namespace -f -e namespace0.0 -m devdax >"$OUT/ndctl-devdax.json" 2>&1
rc=$?
sed 's/^/#   /' "$OUT/ndctl-devdax.json"
setup "ndctl makes namespace0.0 devdax" test "$rc" = 0
setup "/dev/dax0.0 is there" wait_for $((10 * TF)) test -c /dev/dax0.0
if [ "$have_check" = 1 ]; then
	rsiw_up device-DAX
	flush_check devdax-check --dax /dev/dax0.0
	check "device-DAX registers with IBV_ACCESS_FLUSH_PERSISTENT" \
		grep -q '^ok - device-DAX /dev/dax0.0 registers with IBV_ACCESS_FLUSH_PERSISTENT' \
		"$OUT/devdax-check.txt"
	# 77 (the provider cannot post a Flush) fails as any non-zero exit.
	expect_eq "rsiw-flush-check on device-DAX: every check passed, the Flushes posted (exit 0)" 0 "$frc"
	# Reboot-free read back: a new process maps the device.
	check "a new mapping of /dev/dax0.0 holds 2 MiB of \"rsiw-user-flush\\n\"" python3 -c '
import mmap, os, sys
fd = os.open("/dev/dax0.0", os.O_RDWR)
m = mmap.mmap(fd, 2 << 20, mmap.MAP_SHARED, mmap.PROT_READ)
sys.exit(0 if m[:] == b"rsiw-user-flush\n" * (2 << 16) else 1)'
	echo "$frc" >"$OUT/devdax-check.status"
	check "rmmod rsiw (after device-DAX)" rmmod rsiw
fi

check_dmesg_clean "dmesg has no warnings, oopses or leaks (userspace parts)"
dmesg -C

# ---- 4. fsdax, kernel consumer ----
fsdax kunit
pmem_kunit_commit $len
sync
echo 3 >/proc/sys/vm/drop_caches
dd if=/dev/pmem0 of=/tmp/pmem-got2 bs=4096 count=$((len / 4096)) status=none
check "and read through the page cache after drop_caches" cmp /tmp/pmem-expected /tmp/pmem-got2

check_dmesg_clean "dmesg has no warnings, oopses or leaks (kernel consumer)"
finish
