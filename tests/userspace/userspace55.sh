#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rsiw's provider built against rdma-core 55 (scripts/build-rdma-core.sh,
# make -C providers/rsiw and -C tests/progs RDMA_CORE=<prefix>: rdma-core-55/ in each)
# under that rdma-core's libibverbs, beside Debian's 44 (userspace.sh): two
# rsiw devices on a veth pair; rdma-core 55's ibv_devinfo and rping -V,
# rsiw-uverbs-check built against 55, and rsiw-flush-check on anonymous
# memory (its registration checks and its Flushes: the provider offers
# IBV_QP_EX_WITH_FLUSH, so its exit 77, "cannot post a Flush", fails).
set -u
. "$(dirname "$0")/../common/lib.sh"

prov="$RSIW_ROOT/providers/rsiw/rdma-core-55"
progs="$RSIW_ROOT/tests/progs/rdma-core-55"
P=$(readelf -d "$progs/rsiw-uverbs-check" 2>/dev/null | sed -n 's/.*runpath: \[\(.*\)\/lib\]/\1/p')
setup "the rdma-core 55 build of the provider and its checks are there" \
	test -f "$prov/librsiw-rdmav34.so" -a -x "$progs/rsiw-uverbs-check" -a -x "$progs/rsiw-flush-check"
setup "their libibverbs is the prefix's rdma-core 55 ($P)" test -f "$P/lib/libibverbs.so.1.14.55.0"
export RDMAV_DRIVERS="$prov/librsiw"
a=10.95.0.1
b=10.95.0.2
local_veth rsiwv0 $a rsiwv1 $b
ulimit -c unlimited
echo "$OUT/core.%e.%p" >/proc/sys/kernel/core_pattern

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add rsiw0 on rsiwv0" rdma link add rsiw0 type rsiw netdev rsiwv0
setup "rdma link add rsiw1 on rsiwv1" rdma link add rsiw1 type rsiw netdev rsiwv1

LD_LIBRARY_PATH=$P/lib "$P/bin/ibv_devinfo" -d rsiw0 >"$OUT/devinfo55.txt" 2>&1
check "rdma-core 55's ibv_devinfo: rsiw0 is iWARP" grep -q 'transport:.*iWARP' "$OUT/devinfo55.txt"
expect_eq "the process mapped rdma-core 55's libibverbs" 1 \
	"$(ldd "$progs/rsiw-uverbs-check" | grep -c "$P/lib/libibverbs.so.1")"

LD_LIBRARY_PATH=$P/lib timeout 120 "$P/bin/rping" -s -a $a -C 10 -S 4096 -v >"$OUT/rping55-server.txt" 2>&1 &
server=$!
# 30 s: rping's server listens within a second on the lean kernel.
wait_for $((30 * TF)) listening 7174
check "rdma-core 55's rping -V: 10 rounds of 4 KiB" \
	to "$OUT/rping55-client.txt" env LD_LIBRARY_PATH=$P/lib timeout 120 "$P/bin/rping" -c -a $a -I $b -C 10 -S 4096 -V -v
wait $server
expect_eq "its server's exit status" 0 $?
expect_eq "rping client rounds" 10 "$(grep -c 'ping data' "$OUT/rping55-client.txt")"

to "$OUT/uverbs-check55.txt" "$progs/rsiw-uverbs-check" $a $b
sed -n 's/^\(not \)\{0,1\}ok - /rsiw-uverbs-check (55): &/p' "$OUT/uverbs-check55.txt"
check "rsiw-uverbs-check (rdma-core 55): every check passed" grep -qx PASSED "$OUT/uverbs-check55.txt"

timeout 120 "$progs/rsiw-flush-check" $a $b >"$OUT/flush-check.txt" 2>&1
frc=$?
sed -n 's/^\(not \)\{0,1\}ok - /rsiw-flush-check: &/p; s/^skip - /# rsiw-flush-check: skip - /p' "$OUT/flush-check.txt"
# 77 is "the provider cannot post a Flush": it can, so that fails too.
expect_eq "rsiw-flush-check: every check passed, the Flushes posted (exit 0)" 0 "$frc"

check "rmmod rsiw" rmmod rsiw
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
