#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A hostile process against the shared rings, as an unprivileged user
# (nobody): tests/progs/rsiw-hostile-ring.
#
# - Two threads racing a QP's ring producer indices against its doorbells
#   in Error: every doorbell takes at most a ring's worth of entries and
#   returns within a bound (the kernel flushes at most what was posted
#   when the flush began), no soft lockup or RCU stall in dmesg.
# - Two QPs on one SRQ, one peer closing: the other QP's posted receives
#   are still there and complete with their data; the closed QP takes
#   none of them and raises IBV_EVENT_QP_LAST_WQE_REACHED once.
# Then rsiw unloads and dmesg is clean.
#
#   hostile-ring.sh [SECONDS]   how long the producer races (default 25:
#                               longer than the soft-lockup threshold)
#
# rsiw0 on rsiwh0 (10.98.0.1), rsiw1 on rsiwh1 (10.98.0.2), a veth pair in
# the initial namespace, as in uvfuzz.sh.
set -u
. "$(dirname "$0")/../common/lib.sh"

secs=${1:-25}
a=10.98.0.1
b=10.98.0.2

# The program and the provider where nobody can read them.
bin=/tmp/hostile-ring
setup "rsiw-hostile-ring and the provider where nobody can read them" nobody_bin $bin rsiw-hostile-ring

dmesg -C
local_rsiw_pair rsiwh0 $a rsiwh1 $b
check "ports ACTIVE" wait_for 10 bash -c 'grep -q ACTIVE /sys/class/infiniband/rsiw0/ports/1/state && grep -q ACTIVE /sys/class/infiniband/rsiw1/ports/1/state'
check "nobody is not root" [ "$(setpriv --reuid=65534 --regid=65534 --clear-groups id -u)" = 65534 ]

t0=$(date +%s)
timeout -s KILL $((secs + 240)) setpriv --reuid=65534 --regid=65534 --clear-groups -- \
	$bin/rsiw-hostile-ring $a $b "$secs" >"$OUT/hostile-ring.txt" 2>&1
rc=$?
t1=$(date +%s)
# Its own lines, as they are (ok / not ok / comments).
grep -E '^(ok|not ok) - ' "$OUT/hostile-ring.txt" | while read -r l; do echo "# rsiw-hostile-ring: $l"; done
grep -E '^#' "$OUT/hostile-ring.txt" | sed 's/^/# rsiw-hostile-ring: /'
expect_eq "rsiw-hostile-ring exits 0 (137: killed, hung)" 0 "$rc"
check "rsiw-hostile-ring: every check passed" grep -qx PASSED "$OUT/hostile-ring.txt"
check "rsiw-hostile-ring: the producer race ended in time ($((t1 - t0)) s)" [ $((t1 - t0)) -lt $((secs + 120)) ]
n=$(grep -c '^not ok - ' "$OUT/hostile-ring.txt")
expect_eq "rsiw-hostile-ring: no 'not ok' line" 0 "$n"
for what in "a send doorbell in Error returns within" "a receive doorbell in Error returns within" \
	"a send doorbell in Error takes at most a ring's worth" "a receive doorbell in Error takes at most a ring's worth" \
	"no SRQ receive completes on the QP whose peer closed" "the other QP's"; do
	check "rsiw-hostile-ring: $what ..." grep -q "^ok - $what" "$OUT/hostile-ring.txt"
done
check "no soft lockup or RCU stall" bash -c '! dmesg | grep -qE "soft lockup|rcu_.*(stall|self-detected)|hung_task"'

check "rdma link delete rsiw0" rdma link delete rsiw0
check "rdma link delete rsiw1" rdma link delete rsiw1
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses, lockups or leaks"
finish
