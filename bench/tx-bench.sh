#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of `bench/bench.sh --vm-tx`: load rsiw.ko with the kernel
# command line selecting only the rsiw_tx_bench KUnit suite
# (kunit.filter_glob) and `tx_bench_mib` MiB per configuration, then print
# the throughput table the suite logged (copying TX against zero-copy TX,
# RDMA Writes over loopback TCP). The suite checks the data; the figures
# are information only. IMPLS (default 0, the module's own choice) lists
# crc32c_impl values to load it with in turn, e.g. "1 2": the kernel's
# crc32c() and the table in one boot.
set -u
. "$(dirname "$0")/../tests/common/lib.sh"

mib=${1:-64}
impls=${2:-0}
: >"$OUT/kunit-dmesg.txt"
for impl in $impls; do
	dmesg -C
	check "insmod rsiw.ko tx_bench_mib=$mib crc32c_impl=$impl" \
		insmod "$RSIW_ROOT/rsiw.ko" tx_bench_mib="$mib" crc32c_impl="$impl"
	dmesg >"$OUT/kunit-dmesg.$impl.txt"
	cat "$OUT/kunit-dmesg.$impl.txt" >>"$OUT/kunit-dmesg.txt"
	check "rsiw_tx_bench passed (crc32c_impl=$impl)" \
		grep -q '^\[[ 0-9.]*\] ok [0-9]* rsiw_tx_bench' "$OUT/kunit-dmesg.$impl.txt"
	echo "# RDMA Write throughput over loopback TCP, 8 in flight, $mib MiB per run, $(nproc) CPUs:"
	grep -o 'rsiw: MPA CRC32c: .*' "$OUT/kunit-dmesg.$impl.txt" | head -1 | sed 's/^rsiw: /#   /'
	grep -o 'rsiw tx bench: .*' "$OUT/kunit-dmesg.$impl.txt" | sed 's/^rsiw tx bench: /#   /'
	check "rmmod rsiw" rmmod rsiw
done
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
