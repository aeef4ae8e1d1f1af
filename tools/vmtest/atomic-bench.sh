#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of `scripts/bench.sh --vm-atomics`: load rsiw.ko with the
# kernel command line selecting only the rsiw_atomic_bench KUnit suite
# (kunit.filter_glob) and `atomic_bench_ops` FetchAdds per QP, then print
# the ops/s table the suite logged. The suite checks every result (no lost
# or duplicated update); the figures themselves are information only.
set -u
. "$(dirname "$0")/lib.sh"

ops=${1:-20000}
dmesg -C
check "insmod rsiw.ko atomic_bench_ops=$ops" insmod "$RSIW_ROOT/rsiw.ko" atomic_bench_ops="$ops"
dmesg >"$OUT/kunit-dmesg.txt"
check "rsiw_atomic_bench passed" grep -q '^\[[ 0-9.]*\] ok [0-9]* rsiw_atomic_bench' "$OUT/kunit-dmesg.txt"
echo "# RFC 7306 FetchAdd over loopback TCP, $ops ops per QP, $(nproc) CPUs:"
grep -o 'rsiw atomic bench: .*' "$OUT/kunit-dmesg.txt" | sed 's/^rsiw atomic bench: /#   /'
check "rmmod rsiw" rmmod rsiw
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
