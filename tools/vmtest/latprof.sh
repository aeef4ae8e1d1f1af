#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Diagnostic (not a test): where a 64-byte qperf rc_lat message's time
# goes inside rsiw, timed by the phase probes of an RSIW_PROF=1 build
# (rust/prof.rs), beside siw's and TCP's latency in the same boot, two
# namespaces joined by veth, ROUNDS rounds of SECONDS each. Prints, per
# phase, calls and microseconds per doorbell (one doorbell per message:
# both ends' phases count, so per doorbell is per message), averaged over
# the module's reports.
#   make KDIR=... RSIW_PROF=1 modules && make -C tools/provider    # in TREE (not under /tmp)
#   scripts/vm-run.sh --append kunit.enable=0 -- tools/vmtest/latprof.sh TREE [ROUNDS [SECONDS]]
# LATPROF_QPB="MODE DEPTH" (e.g. "send 4"): where a 64 KiB message's time
# goes in bulk instead: rsiw-qpbench -m MODE -d DEPTH (one doorbell per
# message) beside siw and one TCP stream, MB/s per run; LATPROF_MTU sets
# the veth pair's MTU (default 1500). LATPROF_PT=ib_write_lat (or another
# perftest latency tool): that tool's 64-octet latency (-R, busy polling,
# its t_avg) instead of qperf's; the TCP figure stays qperf's tcp_lat
# (blocking, not busy polling: no baseline for these rounds).
# (Documentation/performance.md, "Where a message's time goes inside rsiw").
set -u
. "$(dirname "$0")/lib.sh"
tree=$1 rounds=${2:-3} secs=${3:-3}
A=10.98.0.1 B=10.98.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
bench_netns $A $B || { echo "latprof: no namespaces"; exit 1; }
if [ -n "${LATPROF_MTU:-}" ]; then
	ina ip link set bcA mtu "$LATPROF_MTU" && inb ip link set bcB mtu "$LATPROF_MTU" ||
		{ echo "latprof: MTU $LATPROF_MTU not set"; exit 1; }
fi
qpb=${LATPROF_QPB:-}
export PATH="$RSIW_ROOT/tools/bench:$PATH"
modprobe siw || { echo "latprof: no siw"; exit 1; }
insmod "$tree/rsiw.ko" || { echo "latprof: insmod $tree/rsiw.ko failed"; exit 1; }
dmesg -C
qs=
server() {
	[ -n "$qs" ] && { kill "$qs"; wait "$qs" 2>/dev/null; }
	if [ "$1" = rsiw ]; then export RDMAV_DRIVERS=$tree/tools/provider/librsiw; else unset RDMAV_DRIVERS; fi
	ina qperf >/dev/null 2>&1 &
	qs=$!
	sleep 1
}
# bw MODE DEPTH: one rsiw-qpbench run, MB/s (empty on failure).
port=18900
bw() {
	local s
	port=$((port + 1))
	ina timeout 60 rsiw-qpbench server -a $A -p $port -n 1 -m "$1" >/dev/null 2>&1 &
	s=$!
	sleep 0.5
	inb timeout 60 rsiw-qpbench client -a $A -b $B -p $port -n 1 -m "$1" -d "$2" -t "$secs" 2>&1 |
		awk '/^aggregate_mbps/ { print $2 }'
	wait $s
}
# pt: LATPROF_PT's perftest latency (-R, 64 octets, -D), its t_avg in us.
pt_n=0
pt() {
	local s v
	pt_n=$((pt_n + 1))
	ina timeout 60 $LATPROF_PT -R -d ${1}0 -s 64 -D "$secs" >"$OUT/pt-$pt_n-$1-server.txt" 2>&1 &
	s=$!
	wait_for 30 listening 18515 bA
	inb timeout 60 $LATPROF_PT -R -d ${1}1 --source_ip $B -s 64 -D "$secs" $A >"$OUT/pt-$pt_n-$1.txt" 2>&1
	wait $s
	v=$(awk '$1 == 64 { v = $3 } END { print v }' "$OUT/pt-$pt_n-$1.txt")
	# A failed run's output, for the log (stderr first: it is unbuffered).
	[ -n "$v" ] || sed "s/^/latprof:   $1 client: /" "$OUT/pt-$pt_n-$1.txt" >&2
	echo "$v"
}
lat() {
	inb qperf -t "$secs" -m 64 "$@" 2>&1 | qperf_us
}
unit=us
[ -n "$qpb" ] && unit=MB/s
for r in $(seq 1 "$rounds"); do
	for impl in rsiw siw tcp; do
		case $impl in
		tcp)
			if [ -n "$qpb" ]; then
				v=$(bw tcp 1)
			else
				# perftest's rounds need no qperf server: start one here.
				[ -n "${LATPROF_PT:-}" ] && server tcp
				v=$(lat $A tcp_lat)
			fi
			;;
		*)
			if [ -n "$qpb" ] || [ -n "${LATPROF_PT:-}" ]; then
				if [ $impl = rsiw ]; then export RDMAV_DRIVERS=$tree/tools/provider/librsiw; else unset RDMAV_DRIVERS; fi
			else
				server $impl
			fi
			ina rdma link add ${impl}0 type $impl netdev bcA && inb rdma link add ${impl}1 type $impl netdev bcB
			if [ -n "$qpb" ]; then
				v=$(bw $qpb)
			elif [ -n "${LATPROF_PT:-}" ]; then
				v=$(pt $impl)
			else
				v=$(lat -cm1 $A rc_lat)
			fi
			rdma link delete ${impl}0; rdma link delete ${impl}1
			;;
		esac
		echo "latprof: round $r $impl ${v:-failed} $unit"
	done
done
kill $qs 2>/dev/null
wait $qs 2>/dev/null
rmmod rsiw
# "rsiw: prof PHASE: calls C avg A ns, per doorbell D ns"; a report's
# doorbell line gives its doorbell count.
dmesg | grep "rsiw: prof " | sed 's/.*rsiw: prof //' | awk '
	$1 == "doorbell:" { reports++; doorbells += $3 }
	{ name = $1; sub(/:$/, "", name); if (!(name in calls)) order[++n] = name
	  calls[name] += $3; ns[name] += $3 * $5 }
	END {
		if (!reports) { print "latprof: no phase reports (not an RSIW_PROF=1 build, or under 4096 doorbells)"; exit 1 }
		printf "latprof: %d reports, %d doorbells\n", reports, doorbells
		printf "latprof: %-14s %14s %12s %18s %10s\n", "phase", "calls/doorbell", "avg (us)", "per doorbell (us)", "total (s)"
		for (i = 1; i <= n; i++) { k = order[i]
			printf "latprof: %-14s %14.2f %12.1f %18.1f %10.2f\n", k, calls[k] / doorbells, ns[k] / calls[k] / 1000, ns[k] / doorbells / 1000, ns[k] / 1e9 }
	}'
