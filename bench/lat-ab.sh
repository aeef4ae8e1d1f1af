#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark (not a test): the 64-byte latency of two builds of rsiw (the
# module and its provider), A (before a change) and B (after), each a
# built tree, beside Linux siw and plain TCP in one
# boot, rounds interleaved (A, B, siw, TCP, A, B, ...), two namespaces
# joined by veth (bench_netns). `qperf -cm1 -m 64 rc_lat` / `tcp_lat`, its
# one-way latency. Prints one line per run, then the medians and ratios.
#   scripts/vm-run.sh --append kunit.enable=0 -- bench/lat-ab.sh \
#       OLD_TREE NEW_TREE [ROUNDS [SECONDS]]
# Each tree: rsiw.ko (`make modules`) and providers/rsiw/librsiw*.so
# (`make -C providers/rsiw`), outside /tmp (the guest hides it).
# LAT_PIN=1: the server on vCPU 0, the client on vCPU 1 (taskset), so a
# message wakes a process on the other vCPU rather than switching to it.
# LAT_STAMP=1: each run inside a window of the QEMU plugins'
# markers (bench/qemu-plugin), its number and implementation in
# OUT/stamp-manifest.txt, for bench/qemu-plugin/stamp.py (the host time of
# each phase of a message, bench/bench.sh --stamp).
# LAT_WIN=1: each run's guest wall-clock start and stop, its
# implementation and figure in OUT/win.txt (bench/bench.sh --jcmiss
# counts QEMU's block lookups on the host meanwhile).
# AB_TEST=rc_rdma_write_bw|rc_rdma_read_bw|rc_bw (AB_SIZE, default 64K):
# a bandwidth A/B instead (MB/s; qperf -cm1 of that test, tcp_bw beside
# it; siw is left out: it refuses the receive-only QPs qperf's bandwidth
# servers create). AB_MTU=N: the veth pair's MTU (default 1500).
set -u
. "$(dirname "$0")/../tests/common/lib.sh"
tree_a=$1 tree_b=$2 rounds=${3:-5} secs=${4:-3}
ADDR_A=10.98.0.1 ADDR_B=10.98.0.2
test=${AB_TEST:-rc_lat} size=${AB_SIZE:-64}
[ "$test" = rc_lat ] || size=${AB_SIZE:-64K}
unit=us impls="A B siw tcp"
case $test in *bw) unit=MB/s impls="A B tcp" ;; esac
pin_a='' pin_b=''
if [ "${LAT_PIN:-0}" = 1 ]; then pin_a="taskset -c 0" pin_b="taskset -c 1"; fi
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
bench_netns $ADDR_A $ADDR_B || { echo "lat-ab: no namespaces"; exit 1; }
if [ -n "${AB_MTU:-}" ]; then
	ip netns exec bA ip link set bcA mtu "$AB_MTU" && ip netns exec bB ip link set bcB mtu "$AB_MTU" ||
		{ echo "lat-ab: MTU $AB_MTU not set"; exit 1; }
fi
modprobe siw || { echo "lat-ab: no siw"; exit 1; }
# server TREE|-: a qperf server with TREE's provider (siw's is the
# system's, found as well); it forks per test, loading providers afresh.
qs=
server() {
	[ -n "$qs" ] && { kill "$qs"; wait "$qs" 2>/dev/null; }
	if [ "$1" = - ]; then unset RDMAV_DRIVERS; else export RDMAV_DRIVERS=$1/providers/rsiw/librsiw; fi
	ina $pin_a qperf >/dev/null 2>&1 &
	qs=$!
	sleep 1
}

mark=
if [ "${LAT_STAMP:-0}" = 1 ]; then
	mark=$RSIW_ROOT/bench/qemu-plugin/marker
	[ -x "$mark" ] || { echo "lat-ab: no $mark (make -C bench/qemu-plugin)"; exit 1; }
	: >"$OUT/stamp-manifest.txt"
	# Fixed user-space addresses, as insncount.sh (the guest's setting).
	sysctl -qw kernel.randomize_va_space=0
fi

# run IMPL: one qperf figure in µs or MB/s (empty on failure).
run() {
	local out v t0 tcp=tcp_lat
	[ $unit = us ] || tcp=tcp_bw
	t0=$(date +%s.%N)
	if [ -n "$mark" ]; then
		# (in a command substitution: the window's number from the file)
		echo "$(($(wc -l <"$OUT/stamp-manifest.txt") + 1)) $impl" >>"$OUT/stamp-manifest.txt"
		"$mark" start
	fi
	case $1 in
	tcp) out=$(inb $pin_b qperf -t "$secs" -m "$size" $ADDR_A $tcp 2>&1) ;;
	*) out=$(inb $pin_b qperf -t "$secs" -cm1 -m "$size" $ADDR_A "$test" 2>&1) ;;
	esac
	[ -z "$mark" ] || "$mark" stop
	v=$(echo "$out" | awk '/latency/ { v = $3; if ($4 == "ms") v *= 1000; if ($4 == "ns") v /= 1000; print v }
		$1 == "bw" { v = $3; if ($4 == "GB/sec") v *= 1000; if ($4 == "KB/sec") v /= 1000; print v }')
	[ "${LAT_WIN:-0}" != 1 ] || echo "$impl $t0 $(date +%s.%N) ${v:-failed}" >>"$OUT/win.txt"
	echo "$v"
}

up() {
	ina rdma link add "${1}0" type "$2" netdev bcA && inb rdma link add "${1}1" type "$2" netdev bcB
}
down() { rdma link delete "${1}0"; rdma link delete "${1}1"; }

declare -A all m
for r in $(seq 1 "$rounds"); do
	for impl in $impls; do
		case $impl in
		A | B)
			tree=$tree_a
			[ $impl = B ] && tree=$tree_b
			insmod "$tree/rsiw.ko" || { echo "lat-ab: insmod $tree/rsiw.ko failed"; continue; }
			server "$tree"
			up rsiw rsiw
			v=$(run rc)
			down rsiw
			rmmod rsiw
			;;
		siw) server -; up siw siw; v=$(run rc); down siw ;;
		tcp) v=$(run tcp) ;;
		esac
		echo "lat-ab: round $r $impl ${v:-failed} $unit"
		all[$impl]="${all[$impl]:-} ${v:-}"
	done
done
kill $qs 2>/dev/null
wait $qs 2>/dev/null

for impl in $impls; do
	m[$impl]=$(echo "${all[$impl]:-}" | median)
	echo "lat-ab: median $impl ${m[$impl]:-none} $unit (runs:${all[$impl]:-})"
done
if [ $unit != us ] && [ -n "${m[A]:-}" ] && [ -n "${m[B]:-}" ] && [ -n "${m[tcp]:-}" ]; then
	awk -v a="${m[A]}" -v b="${m[B]}" -v t="${m[tcp]}" 'BEGIN {
		printf "lat-ab: %s A/tcp %.2f  B/tcp %.2f  B/A %.2f\n", "'"$test"'", a / t, b / t, b / a }'
fi
if [ -n "${m[A]:-}" ] && [ -n "${m[B]:-}" ] && [ -n "${m[siw]:-}" ] && [ -n "${m[tcp]:-}" ]; then
	awk -v a="${m[A]}" -v b="${m[B]}" -v s="${m[siw]}" -v t="${m[tcp]}" 'BEGIN {
		printf "lat-ab: A/siw %.2f  B/siw %.2f  A/tcp %.2f  B/tcp %.2f  B/A %.2f\n", a / s, b / s, a / t, b / t, b / a }'
fi
