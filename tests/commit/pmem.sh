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

pmem_kunit_commit $len

check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
