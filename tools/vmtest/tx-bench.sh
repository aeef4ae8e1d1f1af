#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of `scripts/bench.sh --vm-tx`: load rsiw.ko with the kernel
# command line selecting only the rsiw_tx_bench KUnit suite
# (kunit.filter_glob) and `tx_bench_mib` MiB per configuration, then print
# the throughput table the suite logged (copying TX against zero-copy TX,
# RDMA Writes over loopback TCP). The suite checks the data; the figures
# are information only.
set -u
. "$(dirname "$0")/lib.sh"

mib=${1:-64}
dmesg -C
check "insmod rsiw.ko tx_bench_mib=$mib" insmod "$RSIW_ROOT/rsiw.ko" tx_bench_mib="$mib"
dmesg >"$OUT/kunit-dmesg.txt"
check "rsiw_tx_bench passed" grep -q '^\[[ 0-9.]*\] ok [0-9]* rsiw_tx_bench' "$OUT/kunit-dmesg.txt"
echo "# RDMA Write throughput over loopback TCP, 8 in flight, $mib MiB per run, $(nproc) CPUs:"
grep -o 'rsiw tx bench: .*' "$OUT/kunit-dmesg.txt" | sed 's/^rsiw tx bench: /#   /'
check "rmmod rsiw" rmmod rsiw
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
