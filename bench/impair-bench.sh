#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of `bench/bench.sh --impair`: goodput and latency of rsiw,
# Linux siw, rxe (RoCE v2 over the same link) and plain TCP under tc netem
# impairments, one boot, rounds interleaved (round, impairment,
# implementation). Figures, not checks: nothing here passes or fails on a
# rate. Two namespaces (bA: 10.98.0.1 on bcA, bB: 10.98.0.2 on bcB) joined
# by veth, netem on both ends (so an RTT is twice a delay), the RDMA
# devices in the RDMA core's shared netns mode, one implementation's pair
# of devices at a time.
#   goodput  rsiw-qpbench, one connection for BENCH_QTIME seconds (default
#            5): 64 KiB RDMA Writes, BENCH_DEPTH (default 32) in flight;
#            TCP: one stream of 64 KiB writes (rsiw-qpbench -m tcp)
#   latency  qperf, 64-byte round trips for BENCH_QTIME seconds: rc_lat
#            over rdma_cm (-cm1) for the RDMA implementations, tcp_lat
# Writes $OUT/raw.csv (impairment,impl,round,metric,value,unit) and prints
# progress lines ("bench: ...") and, at the end, the median table.
# Overrides: BENCH_ROUNDS (3), BENCH_IMPAIR (the impairments, names
# below), BENCH_IMPLS ("rsiw siw rxe tcp"), BENCH_QTIME, BENCH_DEPTH.
# An impairment name with "-seg" appended (loss1-seg) applies the same
# netem with the veth's segmentation offloads (TSO, GSO, GRO) off: netem
# acts on skbs, and with the offloads on a TCP skb is a GSO super-packet
# of up to 64 KiB, so "loss 1%" drops one in a hundred super-packets, not
# one in a hundred wire segments as a real link does. Which skb sizes a
# sender builds then decides how much it loses; with "-seg" every sender
# loses the same share of its segments.
set -u
. "$(dirname "$0")/../tests/common/lib.sh"

export PATH="$RSIW_ROOT/bench/qpbench:$PATH"
provider="$RSIW_ROOT/providers/rsiw/librsiw"
raw=$OUT/raw.csv
logs=$OUT/logs
mkdir -p "$logs"
rounds=${BENCH_ROUNDS:-3}
impls=${BENCH_IMPLS:-rsiw siw rxe tcp}
qtime=${BENCH_QTIME:-5}
depth=${BENCH_DEPTH:-32}
declare -A netem=(
	[none]=""
	[delay1]="delay 500us"
	[delay10]="delay 5ms"
	[delay50]="delay 25ms"
	[loss0.1]="loss 0.1%"
	[loss1]="loss 1%"
	[loss5]="loss 5%"
	[delay10-loss1]="delay 5ms loss 1%"
	[reorder]="delay 5ms reorder 25% 50%"
)
impairs=${BENCH_IMPAIR:-none delay1 delay10 delay50 loss0.1 loss1 loss5 delay10-loss1 reorder}
A=10.98.0.1
B=10.98.0.2
port_seq=7700
t_start=$(date +%s)
progress() { printf 'bench: [%4ds] %s\n' $(($(date +%s) - t_start)) "$*"; }
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }

echo "impairment,impl,round,metric,value,unit" >"$raw"
{
	echo "kernel=$(uname -r)"
	echo "vcpus=$(nproc)"
	echo "rounds=$rounds qtime=$qtime depth=$depth"
	for i in $impairs; do echo "netem[$i]=${netem[${i%-seg}]}"; done
} >"$OUT/meta.txt"

setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "siw, rdma_rxe, sch_netem" modprobe -a siw rdma_rxe sch_netem
setup "namespaces bA and bB joined by veth" bench_netns $A $B
setup "ethtool" command -v ethtool

impair() { netem_both bA bcA bB bcB "$@"; }
# The veth's own TSO, GSO and GRO settings (GRO is off by default), as
# ethtool -K arguments: what a "-seg" impairment restores.
own_offloads() {
	ip netns exec "$1" ethtool -k "$2" | awk '
		$1 == "tcp-segmentation-offload:" { t = $2 }
		$1 == "generic-segmentation-offload:" { g = $2 }
		$1 == "generic-receive-offload:" { r = $2 }
		END { print "tso " t " gso " g " gro " r }'
}
own_a=$(own_offloads bA bcA) own_b=$(own_offloads bB bcB)
# offloads off|own: TSO, GSO and GRO of both veth ends off, or as they were.
offloads() {
	local a="tso off gso off gro off" b="tso off gso off gro off"
	[ "$1" = own ] && { a=$own_a b=$own_b; }
	# shellcheck disable=SC2086 # the ethtool arguments, split
	ina ethtool -K bcA $a 2>/dev/null && inb ethtool -K bcB $b 2>/dev/null
}
dev_up() {
	[ "$1" = tcp ] && return 0
	ina rdma link add ${1}0 type "$1" netdev bcA && inb rdma link add ${1}1 type "$1" netdev bcB || return 1
	if [ "$1" = rsiw ]; then export RDMAV_DRIVERS="$provider"; else unset RDMAV_DRIVERS; fi
	wait_for 10 grep -q ACTIVE /sys/class/infiniband/${1}1/ports/1/state
}
dev_down() {
	[ "$1" = tcp ] && return 0
	rdma link delete ${1}0
	rdma link delete ${1}1
	unset RDMAV_DRIVERS
}
emit() { echo "$1,$2,$3,$4,$5,$6" >>"$raw"; }

# goodput IMPAIR IMPL ROUND
goodput() {
	local mode=write p s
	[ "$2" = tcp ] && mode=tcp
	port_seq=$((port_seq + 1))
	p=$port_seq
	ina timeout 120 rsiw-qpbench server -a $A -p $p -n 1 -m $mode >"$logs/qpb-server.txt" 2>&1 &
	s=$!
	wait_for 30 listening $p bA
	if inb timeout 120 rsiw-qpbench client -a $A -b $B -p $p -n 1 -m $mode -s 65536 -d "$depth" -t "$qtime" \
		>"$logs/qpb-client.txt" 2>&1 && wait $s; then
		emit "$1" "$2" "$3" goodput "$(awk '$1 == "aggregate_mbps" { print $2 }' "$logs/qpb-client.txt")" MB/s
	else
		kill $s 2>/dev/null
		wait $s 2>/dev/null
		progress "goodput $2 under $1 failed: $(tail -1 "$logs/qpb-client.txt")"
	fi
}

# latency IMPAIR IMPL ROUND
latency() {
	local s test=rc_lat cm=-cm1 v
	[ "$2" = tcp ] && { test=tcp_lat cm=""; }
	ina qperf >"$logs/qperf-server.txt" 2>&1 &
	s=$!
	wait_for 30 listening 19765 bA
	# -cm1 or nothing; the connect waits 200 ms for the server's listener
	# (qperf 0.4.11 sends its port first: tests/progs/perftest-connect-delay.c)
	# shellcheck disable=SC2086
	if inb timeout 120 env PERFTEST_CONNECT_DELAY_FIRST=1 PERFTEST_CONNECT_DELAY_MS=200 \
		LD_PRELOAD="$PERFTEST_SHIM" qperf -t "$qtime" $cm -m 64 $A $test >"$logs/qperf.txt" 2>&1 &&
		v=$(qperf_us <"$logs/qperf.txt") && [ -n "$v" ]; then
		emit "$1" "$2" "$3" lat_64 "$v" us
	else
		progress "latency $2 under $1 failed: $(tail -1 "$logs/qperf.txt")"
	fi
	kill $s 2>/dev/null
	wait $s 2>/dev/null
}

for r in $(seq 1 "$rounds"); do
	for i in $impairs; do
		n=${netem[${i%-seg}]}
		if [ "$i" != "${i%-seg}" ]; then
			offloads off || { progress "$i: ethtool -K refused"; continue; }
		fi
		# shellcheck disable=SC2086 # the netem options, split
		impair $n || { progress "netem $n: refused"; continue; }
		for impl in $impls; do
			dev_up $impl || { progress "$impl: no devices"; dev_down $impl; continue; }
			goodput "$i" $impl "$r"
			latency "$i" $impl "$r"
			dev_down $impl
			progress "round $r, $i, $impl done"
		done
		impair
		[ "$i" = "${i%-seg}" ] || offloads own
	done
done

# The median table: goodput MB/s and 64-byte latency µs per impairment and
# implementation, rsiw's ratios to TCP and siw.
med() { awk -F, -v i="$1" -v m="$2" -v p="$3" '$1 == i && $2 == p && $4 == m { print $5 }' "$raw" | median; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk "BEGIN { if ($2 > 0) printf \"%.2f\", $1 / $2 }"; }
{
	if uml_guest; then
		echo "Lane: User-Mode Linux (kernel code native; scripts/uml-run.sh)."
	else
		echo "Lane: QEMU under TCG (scripts/vm-run.sh)."
	fi
	echo
	echo "| impairment (netem on both ends) | rsiw MB/s | siw MB/s | rxe MB/s | TCP MB/s | rsiw/TCP | rsiw/siw | rsiw µs | siw µs | rxe µs | TCP µs |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	for i in $impairs; do
		g_r=$(med "$i" goodput rsiw) g_s=$(med "$i" goodput siw) g_x=$(med "$i" goodput rxe) g_t=$(med "$i" goodput tcp)
		l_r=$(med "$i" lat_64 rsiw) l_s=$(med "$i" lat_64 siw) l_x=$(med "$i" lat_64 rxe) l_t=$(med "$i" lat_64 tcp)
		n=${netem[${i%-seg}]:-none}
		[ "$i" = "${i%-seg}" ] || n="$n; offloads off"
		echo "| $i ($n) | ${g_r:--} | ${g_s:--} | ${g_x:--} | ${g_t:--} | $(ratio "$g_r" "$g_t") | $(ratio "$g_r" "$g_s") | ${l_r:--} | ${l_s:--} | ${l_x:--} | ${l_t:--} |"
	done
} >"$OUT/results.md"
cat "$OUT/results.md"
dmesg >"$OUT/dmesg.txt"
# Debian 12's qperf 0.4.11 server segfaults after every RDMA test on any
# device (bench-compare.sh and Documentation/usage.md say why); counted.
echo "# qperf server crashes (qperf 0.4.11's cm_close bug): $(dmesg | grep -cE 'qperf\[[0-9]+\]: segfault at 0 ')"
check_dmesg_clean "dmesg has no warnings, oopses or leaks (qperf's known crash aside)" \
	'qperf\[[0-9]+\]: segfault at 0 ip [0-9a-f]+ sp [0-9a-f]+ error 4 in libibverbs'
finish
