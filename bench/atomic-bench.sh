#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of `bench/bench.sh --vm-atomics`: load rsiw.ko with the
# kernel command line selecting only the rsiw_atomic_bench* KUnit suites
# (kunit.filter_glob) and `atomic_bench_ops` FetchAdds per QP, then print
# the ops/s tables they logged: over loopback TCP (rsiw_atomic_bench) and
# direct calls of the responder's read-modify-write from work items, 10 x
# the ops per caller (rsiw_atomic_bench_direct). The suites check every
# result (no lost or duplicated update); the figures are information only.
set -u
. "$(dirname "$0")/../tests/common/lib.sh"

ops=${1:-20000}
dmesg -C
check "insmod rsiw.ko atomic_bench_ops=$ops" insmod "$RSIW_ROOT/rsiw.ko" atomic_bench_ops="$ops"
dmesg >"$OUT/kunit-dmesg.txt"
check "rsiw_atomic_bench passed" grep -q '^\[[ 0-9.]*\] ok [0-9]* rsiw_atomic_bench$' "$OUT/kunit-dmesg.txt"
check "rsiw_atomic_bench_direct passed" grep -q '^\[[ 0-9.]*\] ok [0-9]* rsiw_atomic_bench_direct$' "$OUT/kunit-dmesg.txt"
echo "# RFC 7306 FetchAdd over loopback TCP, $ops ops per QP, $(nproc) CPUs:"
grep -o 'rsiw atomic bench: .*' "$OUT/kunit-dmesg.txt" | sed 's/^rsiw atomic bench: /#   /'
echo "# Direct respond_on calls from work items (no QP, no TCP), $((10 * ops)) per caller:"
grep -o 'rsiw atomic bench direct: .*' "$OUT/kunit-dmesg.txt" | sed 's/^rsiw atomic bench direct: /#   /'
check "rmmod rsiw" rmmod rsiw
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
