#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Scale soak: N connected QPs from userspace at once
# (rsiw-storm hold: 16 threads open them, each keeps its own PD, CQ, MR
# and QP), a round of traffic on every one (a Send each way and a checked
# RDMA Write), then all torn down; twice. Kernel memory (MemFree and
# Slab from /proc/meminfo) before, while all are up, and after; the
# memory per connection is printed; after the teardown the RDMA objects
# and TCP sockets are back to their baseline, and of three runs the
# last two add (almost) nothing to the slab objects in use.
#
#   soak.sh [N]     N connections (default 1024)
#
# rsiw<->rsiw between namespaces n1 (rsiw0 on rsp1, 10.97.1.1, the
# server) and n2 (rsiw1 on rsp2, 10.97.1.2, the client).
set -u
. "$(dirname "$0")/../common/lib.sh"
. "$(dirname "$0")/../common/stress-lib.sh"

n=${1:-1024}
port=7480

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "namespaces n1 and n2" stress_namespaces
setup "veth rsp1 (n1) <-> rsp2 (n2)" veth_pair rsp1 rsp2 10.97.1
setup "rdma link add rsiw0 on rsp1" in1 rdma link add rsiw0 type rsiw netdev rsp1
setup "rdma link add rsiw1 on rsp2" in2 rdma link add rsiw1 type rsiw netdev rsp2
setup "ports ACTIVE" wait_for $((10 * TF)) bash -c 'grep -q ACTIVE /sys/class/infiniband/rsiw0/ports/1/state && grep -q ACTIVE /sys/class/infiniband/rsiw1/ports/1/state'

no_established() { [ "$(established)" = 0 ]; }
res_back() { [ "$(res_counts)" = "$res0" ]; }
alloc_back() { [ "$(tcp_alloc)" -le "$alloc0" ]; }

# A warm-up hold of 16 (first-use allocations), then the baseline with
# nothing running.
check "warm-up server listens" start_server n1 10.97.1.1 $port "$OUT/soak-warmup-server.txt"
check "warm-up: 16 connections held" in2 timeout 300 "$STORM" hold -a 10.97.1.1 -b 10.97.1.2 -p $port \
	-n 16 -c 4 -t 60 >"$OUT/soak-warmup.txt" 2>&1
stop_server warm-up
res0=$(res_counts)
alloc0=$(tcp_alloc)
sunr0=$(sunreclaim_settled)
slab_shrink
cp /proc/slabinfo "$OUT/soak-slabinfo-0.txt" 2>/dev/null
free0=$(meminfo_kb MemFree)
echo "# baseline: MemFree $free0 kB, SUnreclaim $sunr0 kB, TCP sockets allocated $alloc0"

# hold RUN: the server, N connections held twice (-r 2), the server
# stopped, then everything must be gone; SUnreclaim settled in $sunr.
hold() {
	local run=$1 t0 t1 rc
	port=$((port + 1))
	check "run $run: server listens" start_server n1 10.97.1.1 $port "$OUT/soak-server-$run.txt"
	t0=$(date +%s)
	in2 timeout 1500 "$STORM" hold -a 10.97.1.1 -b 10.97.1.2 -p $port -n "$n" -c 16 -r 2 -R 2 -t 120 \
		>"$OUT/soak-hold-$run.txt" 2>&1
	rc=$?
	t1=$(date +%s)
	grep -E '^(# hold|hold:)' "$OUT/soak-hold-$run.txt" | sed 's/^\([^#]\)/# \1/'
	grep -E '^# hold: connection' "$OUT/soak-hold-$run.txt" | head -5
	echo "# run $run: $n connections, held twice, in $((t1 - t0)) s"
	expect_eq "run $run: $n connections up, 2 rounds on each, torn down; twice: nothing failed" \
		"hold: $n connections x 2: $((2 * n)) ok, 0 failed, 0 timed out; rounds: $((4 * n)) ok, 0 failed, 0 timed out" \
		"$(grep '^hold:' "$OUT/soak-hold-$run.txt" | sed 's/; [0-9]* fatal events.*//')"
	expect_eq "run $run: the hold exits 0" 0 $rc
	for r in 1 2; do
		check "run $run, hold $r: all $n connections were up at once" \
			grep -q "^# hold $r: $n of $n connections up" "$OUT/soak-hold-$run.txt"
	done
	stop_server "run $run"
	check "run $run: no established TCP socket left" wait_for 60 no_established
	check "run $run: RDMA objects back to the baseline (rdma resource show)" wait_for 60 res_back
	check "run $run: TCP sockets allocated back to the baseline ($alloc0)" wait_for 90 alloc_back
	sunr=$(sunreclaim_settled)
	# Per-cache counts, to see which cache grows (diff two runs' files).
	slab_shrink
	cp /proc/slabinfo "$OUT/soak-slabinfo-$run.txt" 2>/dev/null
	obj=$(in_use "$OUT/soak-slabinfo-$run.txt" "$TW_CACHES")
	echo "# run $run: after: SUnreclaim $sunr kB ($((sunr - sunr0)) kB over the baseline), MemFree $(meminfo_kb MemFree) kB; slab objects in use ${obj:-?} kB ($(in_use "$OUT/soak-slabinfo-0.txt" "$TW_CACHES") kB at the baseline; TCP's TIME_WAIT caches apart: $(($(in_use "$OUT/soak-slabinfo-$run.txt") - ${obj:-0})) kB, $(($(tw_count n1) + $(tw_count n2))) sockets in n1 and n2)"
}

# Three runs of two holds each: the first may leave caches grown (SLUB
# keeps some empty slabs per cache), the later ones must not add to what
# is allocated: runs 2 and 3 open 4N connections, so a leak of 1 kB per
# connection grows the slab objects in use (active objects x size over all
# caches, caches shrunk; TCP's TIME_WAIT sockets and bind buckets apart,
# which the kernel keeps 60 s after each close) by 4N kB. Unreclaimable slab (SUnreclaim) also counts the
# partial slabs SLUB keeps, which move by megabytes from run to run with
# nothing leaked (+2684 kB over runs 2 and 3 in one CI boot at N = 1024):
# bound at 8N kB, a guard against runaway growth, not the leak check.
hold 1
sunr1=$sunr obj1=$obj
hold 2
hold 3
sunr3=$sunr obj3=$obj
# (On the debug kernel each is a skip line: lib.sh's slab_check.)
slab_check "slab objects in use: runs 2 and 3 grew them by under $((n * 4)) kB together (${obj1:-?} -> ${obj3:-?} kB)" \
	[ -n "$obj1" -a -n "$obj3" -a $((obj3 - obj1)) -lt $((n * 4)) ]
slab_check "unreclaimable slab: runs 2 and 3 grew it by under $((n * 8)) kB together ($((sunr3 - sunr1)) kB)" \
	[ $((sunr3 - sunr1)) -lt $((n * 8)) ]
# The first run may leave capacity behind (12.6 MB after 2048
# connections of 1024, Documentation/reliability.md): reported, not bound.
echo "# unreclaimable slab: $((sunr1 - sunr0)) kB over the baseline after run 1, $((sunr3 - sunr0)) kB after run 3"

for d in rsiw0 rsiw1; do
	check "rdma link delete $d" rdma link delete $d
done
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
