#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Scale soak (issue 13, item 2): N connected QPs from userspace at once
# (rsiw-storm hold: 16 threads open them, each keeps its own PD, CQ, MR
# and QP), a round of traffic on every one (a Send each way and a checked
# RDMA Write), then all torn down; twice. Kernel memory (MemFree and
# Slab from /proc/meminfo) before, while all are up, and after; the
# memory per connection is printed; after the teardown the RDMA objects
# and TCP sockets are back to their baseline and unreclaimable slab
# within a tolerance.
#
#   soak.sh [N]     N connections (default 128; 1024 is the long form)
#
# rsiw<->rsiw between namespaces n1 (rsiw0 on rsp1, 10.97.1.1, the
# server) and n2 (rsiw1 on rsp2, 10.97.1.2, the client).
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/stress-lib.sh"

n=${1:-128}
port=7480

dmesg -C
check "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
check "namespaces n1 and n2" stress_namespaces
check "veth rsp1 (n1) <-> rsp2 (n2)" veth_pair rsp1 rsp2 10.97.1
check "rdma link add rsiw0 on rsp1" in1 rdma link add rsiw0 type rsiw netdev rsp1
check "rdma link add rsiw1 on rsp2" in2 rdma link add rsiw1 type rsiw netdev rsp2
check "ports ACTIVE" wait_for 10 bash -c 'grep -q ACTIVE /sys/class/infiniband/rsiw0/ports/1/state && grep -q ACTIVE /sys/class/infiniband/rsiw1/ports/1/state'

# A warm-up hold of 16 (first-use allocations), then the baseline.
check "server listens" start_server n1 10.97.1.1 $port "$OUT/soak-server.txt"
check "warm-up: 16 connections held" in2 timeout 300 "$STORM" hold -a 10.97.1.1 -b 10.97.1.2 -p $port \
	-n 16 -c 4 -t 60 >"$OUT/soak-warmup.txt" 2>&1
sync
echo 3 >/proc/sys/vm/drop_caches
res0=$(res_counts)
alloc0=$(tcp_alloc)
free0=$(meminfo_kb MemFree)
slab0=$(meminfo_kb Slab)
sunr0=$(meminfo_kb SUnreclaim)
echo "# baseline: MemFree $free0 kB, Slab $slab0 kB, SUnreclaim $sunr0 kB, TCP sockets allocated $alloc0"

t0=$(date +%s)
in2 timeout 1500 "$STORM" hold -a 10.97.1.1 -b 10.97.1.2 -p $port -n "$n" -c 16 -r 2 -R 2 -t 120 \
	>"$OUT/soak-hold.txt" 2>&1
rc=$?
t1=$(date +%s)
grep -E '^(# hold|hold:)' "$OUT/soak-hold.txt"
grep -E '^# hold: connection' "$OUT/soak-hold.txt" | head -5
echo "# soak: $n connections, held twice, in $((t1 - t0)) s"
expect_eq "$n connections up, 2 rounds on each, torn down; twice: nothing failed" \
	"hold: $n connections x 2: $((2 * n)) ok, 0 failed, 0 timed out; rounds: $((4 * n)) ok, 0 failed, 0 timed out" \
	"$(grep '^hold:' "$OUT/soak-hold.txt" | sed 's/; [0-9]* fatal events.*//')"
expect_eq "the hold exits 0" 0 $rc
for r in 1 2; do
	check "hold $r: all $n connections were up at once" \
		grep -q "^# hold $r: $n of $n connections up" "$OUT/soak-hold.txt"
done
stop_server "soak"
grep '^server:' "$OUT/soak-server.txt" | sed 's/^/# /'

no_established() { [ "$(established)" = 0 ]; }
res_back() { [ "$(res_counts)" = "$res0" ]; }
alloc_back() { [ "$(tcp_alloc)" -le "$alloc0" ]; }
check "no established TCP socket left" wait_for 60 no_established
check "RDMA objects back to the baseline (rdma resource show)" wait_for 60 res_back
check "TCP sockets allocated back to the baseline ($alloc0)" wait_for 90 alloc_back
sync
echo 3 >/proc/sys/vm/drop_caches
free1=$(meminfo_kb MemFree)
slab1=$(meminfo_kb Slab)
sunr1=$(meminfo_kb SUnreclaim)
echo "# after: MemFree $free1 kB ($((free0 - free1)) kB less than the baseline), Slab $slab1 kB ($((slab1 - slab0)) kB more), SUnreclaim $sunr1 kB ($((sunr1 - sunr0)) kB more)"
# Tolerance: 2 MiB of unreclaimable slab and 8 MiB of free memory (page
# and per-CPU caches move), against the several MiB N QPs take.
check "unreclaimable slab back within 2 MiB of the baseline" [ $((sunr1 - sunr0)) -lt 2048 ]
check "free memory back within 8 MiB of the baseline" [ $((free0 - free1)) -lt 8192 ]

for d in rsiw0 rsiw1; do
	check "rdma link delete $d" rdma link delete $d
done
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
