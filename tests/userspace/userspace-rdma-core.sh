#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rsiw's provider built inside rdma-core VERSION's own tree (55 or 59:
# scripts/build-rdma-core.sh VERSION drops providers/rsiw into it and
# installs the whole of it into a private prefix) under that rdma-core's
# libibverbs, beside Debian's 44 (userspace.sh). Two rsiw devices on a
# veth pair; no RDMAV_DRIVERS: the prefix's libibverbs finds the provider
# through the prefix's etc/libibverbs.d, as an installed rdma-core does.
# The prefix's ibv_devinfo and rping -V (and which provider rping's
# process mapped), Debian's perftest through the prefix's libraries
# (LD_LIBRARY_PATH), and the checks built against the prefix
# (make -C tests/progs RDMA_CORE=<prefix>: rdma-core-VERSION/):
# rsiw-uverbs-check (the extended verbs), rsiw-ring-check (the shared
# rings, through the direct verbs librsiw.so.1 exports) and
# rsiw-flush-check on anonymous memory (its registration checks and its
# Flushes, ibv_wr_flush: the provider offers IBV_QP_EX_WITH_FLUSH, so
# its exit 77, "cannot post a Flush", fails).
#   tests/userspace/userspace-rdma-core.sh VERSION
set -u
. "$(dirname "$0")/../common/lib.sh"

v=${1:?usage: $0 VERSION (55, 59)}
rdma_core_find "$v" || echo "# $RC_WHY"
setup "rdma-core $v with rsiw's provider in its tree, and the checks built against it" test -z "$RC_WHY"
echo "# rdma-core $v: $RC, provider $RC_PROVIDER"
unset RDMAV_DRIVERS
pabi=$(rdma_core_pabi "$RC")
expect_eq "the prefix's provider has its libibverbs's private ABI (IBVERBS_PRIVATE_$pabi)" \
	"librsiw-rdmav$pabi.so" "$(basename "$RC_PROVIDER")"
a=10.95.0.1
b=10.95.0.2
setup "veth pair rsiwv0/rsiwv1" local_veth rsiwv0 $a rsiwv1 $b
ulimit -c unlimited
echo "$OUT/core.%e.%p" >/proc/sys/kernel/core_pattern

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add rsiw0 on rsiwv0" rdma link add rsiw0 type rsiw netdev rsiwv0
setup "rdma link add rsiw1 on rsiwv1" rdma link add rsiw1 type rsiw netdev rsiwv1
rc_env=(env LD_LIBRARY_PATH="$RC/lib")

"${rc_env[@]}" "$RC/bin/ibv_devinfo" -d rsiw0 >"$OUT/devinfo$v.txt" 2>&1
check "rdma-core $v's ibv_devinfo: rsiw0 is iWARP" grep -q 'transport:.*iWARP' "$OUT/devinfo$v.txt"
expect_eq "the checks map rdma-core $v's libibverbs" 1 \
	"$(ldd "$RC_PROGS/rsiw-uverbs-check" | grep -c "$RC/lib/libibverbs.so.1")"

"${rc_env[@]}" timeout 120 "$RC/bin/rping" -s -a $a -C 10 -S 4096 -v >"$OUT/rping$v-server.txt" 2>&1 &
server=$!
# 30 s: rping's server listens within a second on the lean kernel.
wait_for $((30 * TF)) listening 7174
mapped=$(mapped_provider $server)
check "rdma-core $v's rping server mapped the prefix's provider (${mapped:-none})" \
	test "$(realpath "$RC_PROVIDER")" = "${mapped:-none}"
check "rdma-core $v's rping -V: 10 rounds of 4 KiB" \
	to "$OUT/rping$v-client.txt" "${rc_env[@]}" timeout 120 "$RC/bin/rping" -c -a $a -I $b -C 10 -S 4096 -V -v
wait $server
expect_eq "its server's exit status" 0 $?
expect_eq "rping client rounds" 10 "$(grep -c 'ping data' "$OUT/rping$v-client.txt")"

# Debian's perftest, its libibverbs and librdmacm the prefix's.
expect_eq "perftest under LD_LIBRARY_PATH maps rdma-core $v's libibverbs" 1 \
	"$("${rc_env[@]}" ldd "$(command -v ib_write_bw)" | grep -c "$RC/lib/libibverbs.so.1")"
for t in ib_write_bw ib_read_bw ib_send_bw; do
	PERFTEST_TAG="rdma-core $v" perftest_bw $t $a $b rsiw0 rsiw1 "${rc_env[@]}"
done

to "$OUT/uverbs-check$v.txt" "$RC_PROGS/rsiw-uverbs-check" $a $b
sed -n "s/^\(not \)\{0,1\}ok - /rsiw-uverbs-check ($v): &/p" "$OUT/uverbs-check$v.txt"
check "rsiw-uverbs-check (rdma-core $v): every check passed" grep -qx PASSED "$OUT/uverbs-check$v.txt"

to "$OUT/ring-check$v.txt" "$RC_PROGS/rsiw-ring-check" $a $b
sed -n "s/^\(not \)\{0,1\}ok - /rsiw-ring-check ($v): &/p" "$OUT/ring-check$v.txt"
check "rsiw-ring-check (rdma-core $v, the direct verbs of librsiw.so.1): every check passed" \
	grep -qx PASSED "$OUT/ring-check$v.txt"

timeout 120 "$RC_PROGS/rsiw-flush-check" $a $b >"$OUT/flush-check$v.txt" 2>&1
frc=$?
sed -n "s/^\(not \)\{0,1\}ok - /rsiw-flush-check ($v): &/p; s/^skip - /# rsiw-flush-check ($v): skip - /p" "$OUT/flush-check$v.txt"
# 77 is "the provider cannot post a Flush": it can, so that fails too.
expect_eq "rsiw-flush-check (rdma-core $v): every check passed, the Flushes posted (exit 0)" 0 "$frc"
# Persistent flush is announced where the kernel has the pmem API (x86):
# everywhere but User-Mode Linux, which has none.
want=yes
uml_guest && want=no
expect_eq "rsiw-flush-check (rdma-core $v): the device announces persistent flush: $want" "$want" \
	"$(sed -n 's/^# the device announces persistent flush: //p' "$OUT/flush-check$v.txt")"

check "rdma link delete rsiw0" rdma link delete rsiw0
check "rdma link delete rsiw1" rdma link delete rsiw1
check "rmmod rsiw" rmmod rsiw
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
