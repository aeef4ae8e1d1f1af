#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Lossy, long-distance and misbehaving links: tc netem on both ends of the
# veth between namespaces n1 (rsiw0) and n2 (rsiw1, or siw1), one
# impairment at a time, under load that checks its data:
#   - rsiw-storm holding 4 connections, each round a Send each way and an
#     RDMA Write read back and compared: every round ok, none failed or
#     timed out, no fatal event, the server saw no bad request or error;
#   - rping -V (every ping's data verified) rsiw to rsiw, and rsiw's
#     client to a siw server;
#   - on the blackout case, the link drops every packet for 4 s in the
#     middle of the load (the carrier stays up): TCP carries the streams
#     over the gap and no connection is lost.
# Then no RDMA object left, no Terminate sent or received, dmesg clean.
# Goodput and latency under the same impairments: bench/bench.sh --impair.
#   impair.sh [CASE...]   (default: every case; names below)
set -u
. "$(dirname "$0")/../common/lib.sh"
. "$(dirname "$0")/../common/stress-lib.sh"

# CASE -> the netem options on each end (so an RTT is twice the delay).
declare -A netem=(
	[delay1]="delay 500us"
	[delay10]="delay 5ms"
	[delay50]="delay 25ms"
	[loss0.1]="loss 0.1%"
	[loss1]="loss 1%"
	[loss5]="loss 5%"
	[reorder]="delay 5ms reorder 25% 50%"
	[duplicate]="duplicate 2%"
	[blackout]="delay 1ms"
)
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(delay1 delay10 delay50 loss0.1 loss1 loss5 reorder duplicate blackout)
port=7600

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "modprobe siw, sch_netem" modprobe -a siw sch_netem
setup "namespaces n1 and n2" stress_namespaces
setup "veth imp1 (n1) and imp2 (n2)" veth_pair imp1 imp2 10.96.0
setup "rdma link add rsiw0 on imp1 (n1)" in1 rdma link add rsiw0 type rsiw netdev imp1
setup "rdma link add rsiw1 on imp2 (n2)" in2 rdma link add rsiw1 type rsiw netdev imp2
setup "ports active" wait_for $((10 * TF)) bash -c 'grep -q ACTIVE /sys/class/infiniband/rsiw0/ports/1/state && grep -q ACTIVE /sys/class/infiniband/rsiw1/ports/1/state'
# terminates DEV: its Terminates sent and received, "SENT RECEIVED".
terminates() { cat /sys/class/infiniband/"$1"/ports/1/hw_counters/terminate_{sent,received} | paste -sd' '; }
no_objects() { ! rdma resource show 2>/dev/null | grep -qE '(qp|cq|pd|mr|cm_id|ctx) [1-9]'; }

# impair [OPTIONS...]: the same netem on both ends; none without OPTIONS.
# shellcheck disable=SC2120 # check passes the options
impair() { netem_both n1 imp1 n2 imp2 "$@"; }

# rping_v NAME COUNT: rping -V, COUNT pings of 16 KiB,
# the server on 10.96.0.1 in n1, the client from 10.96.0.2 in n2.
rping_v() {
	local name=$1 count=$2 s rc
	port=$((port + 1))
	in1 timeout 300 rping -s -a 10.96.0.1 -p $port -C "$count" -S 16384 >"$OUT/impair-$name-rping-server.txt" 2>&1 &
	s=$!
	wait_for 30 listening $port n1
	in2 timeout 300 rping -c -a 10.96.0.1 -I 10.96.0.2 -p $port -C "$count" -S 16384 -V >"$OUT/impair-$name-rping-client.txt" 2>&1
	rc=$?
	wait $s
	[ $rc = 0 ] && ! grep -qiE "miscompare|mismatch|error|fail" "$OUT/impair-$name-rping-client.txt"
}

for c in "${cases[@]}"; do
	[ -n "${netem[$c]:-}" ] || { fail "$c: no such case"; continue; }
	# shellcheck disable=SC2086 # the netem options, split
	check "$c: netem ${netem[$c]} on both ends" impair ${netem[$c]}
	# Pings and rounds per case: about the same time at every RTT.
	count=100
	case $c in delay50) count=20 ;; delay10 | reorder) count=50 ;; esac
	# --- rsiw-storm: 4 connections, rounds with checked RDMA Writes ---
	port=$((port + 1))
	sout="$OUT/impair-$c-server.txt" cout="$OUT/impair-$c-client.txt"
	check "$c: storm server listens" start_server n1 10.96.0.1 $port "$sout"
	in2 "$STORM" hold -a 10.96.0.1 -b 10.96.0.2 -p $port -n 4 -c 4 -T 10 -t 90 >"$cout" 2>&1 &
	client=$!
	if [ "$c" = blackout ]; then
		wait_for $((60 * TF)) grep -q "^# hold 1: 4 of 4 connections up" "$cout"
		sleep 2
		in1 tc qdisc change dev imp1 root netem loss 100%
		in2 tc qdisc change dev imp2 root netem loss 100%
		sleep 4
		in1 tc qdisc change dev imp1 root netem delay 1ms
		in2 tc qdisc change dev imp2 root netem delay 1ms
	fi
	wait_for $((300 * TF)) bash -c "! kill -0 $client 2>/dev/null" || kill -KILL $client
	wait $client
	rc=$?
	sum=$(grep '^hold:' "$cout")
	echo "# $c: $sum"
	grep -E '^# hold: connection' "$cout" | head -3 | sed 's/^/#   /'
	check "$c: the client exits 0" [ $rc = 0 ]
	check "$c: every round ok (Sends, checked RDMA Writes), none failed or timed out" \
		bash -c "echo '$sum' | grep -qE 'rounds: [1-9][0-9]* ok, 0 failed, 0 timed out; 0 fatal events'"
	check "$c: every connection ok" bash -c "echo '$sum' | grep -qE ': 4 ok, 0 failed, 0 timed out;'"
	stop_server "$c"
	check "$c: the server saw no bad request and no error" grep -qE '^server: .* 0 bad requests, 0 errors' "$sout"
	# --- rping -V, rsiw to rsiw, then rsiw to siw ---
	check "$c: rping -V rsiw to rsiw, $count pings of 16 KiB" rping_v "$c-rsiw" $count
	expect_eq "$c: no Terminate sent or received" "0 0 0 0" "$(terminates rsiw0) $(terminates rsiw1)"
	in1 rdma link delete rsiw0
	setup "$c: rdma link add siw0 on imp1 (n1)" in1 rdma link add siw0 type siw netdev imp1
	check "$c: rping -V rsiw (n2) to a siw server (n1), $count pings" rping_v "$c-siw" $count
	in1 rdma link delete siw0
	setup "$c: rdma link add rsiw0 on imp1 (n1) again" in1 rdma link add rsiw0 type rsiw netdev imp1
	check "$c: no RDMA object left" wait_for $((30 * TF)) no_objects
	impair
done

expect_eq "rsiw1 (the client of every siw round): no Terminate sent or received" "0 0" "$(terminates rsiw1)"
check "rdma link delete" bash -c 'rdma link delete rsiw0 && rdma link delete rsiw1'
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg-impair.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
