#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# RDMA Commit into persistent memory. The guest boots with emulated pmem
# (memmap=64M!1G: legacy e820 pmem in RAM), which is turned into an fsdax
# namespace so /dev/pmem0 has struct pages (DAX). Loading rsiw runs the
# rsiw_flush KUnit suite (kunit.filter_glob=rsiw_flush on the command
# line), whose pmem case fast-registers the first 256 KiB of /dev/pmem0
# with IB_ACCESS_FLUSH_PERSISTENT, RDMA-Writes a pattern into it from a
# peer QP and commits it with IB_WR_FLUSH. After rmmod the bytes are read
# back through the block device and compared.
set -u
. "$(dirname "$0")/../common/lib.sh"

len=$((256 * 1024))   # PMEM_LEN in rust/selftest/flush.rs
dmesg -C

# The pmem device and its namespace are setup (the kernel's, not rsiw's).
setup "legacy pmem region (memmap=!) present" test -b /dev/pmem0
ndctl create-namespace -f -e namespace0.0 -m fsdax --map=mem >"$OUT/ndctl.json" 2>&1
rc=$?
sed 's/^/#   /' "$OUT/ndctl.json"
setup "ndctl makes namespace0.0 fsdax" test "$rc" = 0
# 10 s: the block device is back within a second; TF for the debug kernel.
setup "/dev/pmem0 is back" wait_for $((10 * TF)) test -b /dev/pmem0
setup "/dev/pmem0 supports DAX" test "$(cat /sys/block/pmem0/queue/dax 2>/dev/null)" = 1
# Start from zeroes: the pattern can only come from the test.
setup "zero the first MiB of /dev/pmem0" dd if=/dev/zero of=/dev/pmem0 bs=1M count=1 oflag=direct status=none

# The test opens the device by number (KUnit cases run in kthreads,
# which do not see this root filesystem's /dev).
IFS=: read -r maj min </sys/block/pmem0/dev
# The load runs the suite; its verdict is checked below.
setup "insmod rsiw.ko (runs rsiw_flush on pmem0 = $maj:$min)" \
	insmod "$RSIW_ROOT/rsiw.ko" kunit_pmem_dev=$(((maj << 20) | min))
dmesg >"$OUT/kunit-dmesg.txt"
check "rmmod rsiw" rmmod rsiw
check "rsiw_flush passed, pmem case included (not skipped)" \
	"$RSIW_ROOT/scripts/kunit-check.sh" --suites rsiw_flush \
	--require rsiw_flush.pmem_persistent_flush "$OUT/kunit-dmesg.txt"
check "the pmem case says it committed $len octets" \
	grep -q "rsiw kunit: $len octets written and committed to /dev/pmem0" "$OUT/kunit-dmesg.txt"

# What the test wrote: "rsiw-pmem-flush\n" over and over.
yes rsiw-pmem-flush | head -c $len >/tmp/pmem-expected
dd if=/dev/pmem0 of=/tmp/pmem-got bs=4096 count=$((len / 4096)) iflag=direct status=none
check "/dev/pmem0 holds the RDMA-written pattern after rmmod" cmp /tmp/pmem-expected /tmp/pmem-got
check "and only there: the next octet is still zero" \
	test "$(dd if=/dev/pmem0 bs=1 skip=$len count=1 status=none | od -An -tx1 | tr -d ' ')" = 00

check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
