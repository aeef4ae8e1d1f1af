#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark (not a test): the steady 64 KiB rows (rsiw-qpbench, one QP,
# MODE:DEPTH) and perftest's 64 KiB busy-polling latency of several builds
# of rsiw beside Linux siw, rounds interleaved in one boot, two namespaces
# joined by veth (bench_netns). Prints one line per run:
#   QPB ROUND MTU IMPL MODE:DEPTH MB/s cpu_busy_each ...
#   LAT ROUND MTU IMPL TOOL t_typical t_avg        (µs, one way)
#   scripts/vm-run.sh --append kunit.enable=0 -- tools/vmtest/steady-ab.sh TREE... [-- ROUNDS]
# Each TREE: rsiw.ko (`make modules`) and tools/provider (`make -C
# tools/provider`), outside /tmp (the guest hides it); tools/bench is this
# tree's. SAB_MTUS (default "1500 9000"), SAB_MODES (default "send:4
# write:4 read:1 read:16"), SAB_SECS (3), SAB_LAT (default "ib_send_lat
# ib_write_lat"; " ": none), SAB_LAT_N (1000 iterations).
set -u
. "$(dirname "$0")/lib.sh"
trees=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do trees+=("$(realpath "$1")"); shift; done
[ "${1:-}" = -- ] && shift
rounds=${1:-3}
[ ${#trees[@]} -gt 0 ] || { echo "usage: steady-ab.sh TREE... [-- ROUNDS]"; exit 2; }
mtus=${SAB_MTUS:-"1500 9000"} modes=${SAB_MODES:-"send:4 write:4 read:1 read:16"} secs=${SAB_SECS:-3}
lats=${SAB_LAT:-"ib_send_lat ib_write_lat"} latn=${SAB_LAT_N:-1000}
A=10.98.0.1 B=10.98.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
bench_netns $A $B || { echo "steady-ab: no namespaces"; exit 1; }
modprobe siw || { echo "steady-ab: no siw"; exit 1; }
Q=$RSIW_ROOT/tools/bench/rsiw-qpbench
[ -x "$Q" ] || { echo "steady-ab: no $Q (make -C tools/bench)"; exit 1; }
port=21000 rc=0
lines=$OUT/sab-lines.txt
: >"$lines"
emit() { echo "$*" | tee -a "$lines"; }
for r in $(seq "$rounds"); do
	for mtu in $mtus; do
		ina ip link set bcA mtu "$mtu" && inb ip link set bcB mtu "$mtu" || exit 1
		for impl in "${trees[@]}" siw; do
			if [ "$impl" = siw ]; then
				unset RDMAV_DRIVERS
				d=siw
			else
				insmod "$impl/rsiw.ko" || { echo "steady-ab: insmod $impl failed"; exit 1; }
				export RDMAV_DRIVERS=$impl/tools/provider/librsiw
				d=rsiw
			fi
			ina rdma link add ${d}0 type $d netdev bcA && inb rdma link add ${d}1 type $d netdev bcB || exit 1
			for md in $modes; do
				m=${md%%:*} dp=${md##*:}
				port=$((port + 1))
				ina timeout 60 "$Q" server -a $A -p $port -n 1 -m "$m" -d "$dp" >"$OUT/sab-server.txt" 2>&1 &
				s=$!
				wait_for 30 listening $port bA
				inb timeout 60 "$Q" client -a $A -b $B -p $port -n 1 -m "$m" -d "$dp" -t "$secs" >"$OUT/sab-client.txt" 2>&1 || rc=1
				wait $s || rc=1
				emit "QPB $r $mtu $impl $md $(awk '$1 == "aggregate_mbps" { print $2 }' "$OUT/sab-client.txt") $(grep ^cpu_busy_each "$OUT/sab-client.txt")"
			done
			for t in $lats; do
				ina timeout 120 $t -R -d ${d}0 -s 65536 -n "$latn" >"$OUT/sab-lat-server.txt" 2>&1 &
				s=$!
				wait_for 30 listening 18515 bA
				sleep 0.3
				inb env LD_PRELOAD="$PERFTEST_SHIM" timeout 120 $t -R -d ${d}1 --source_ip $B -s 65536 -n "$latn" $A \
					>"$OUT/sab-lat-client.txt" 2>&1 || rc=1
				wait $s || rc=1
				emit "LAT $r $mtu $impl $t $(awk '$1 == 65536 { print $5, $6 }' "$OUT/sab-lat-client.txt")"
			done
			ina rdma link delete ${d}0
			inb rdma link delete ${d}1
			[ $d = rsiw ] && rmmod rsiw
		done
	done
done
# Medians per row.
echo "== medians (MB/s; latency µs t_typical)"
awk '{ print $1, $3, $5, $4, $6 }' "$lines" | sort -k1,4 -k5,5g | awk '{ k = $1 " " $2 " " $3 " " $4
	if (k != p) { if (p != "") print p, a[int((n + 1) / 2)]; p = k; n = 0 }
	a[++n] = $5 }
	END { if (p != "") print p, a[int((n + 1) / 2)] }'
exit $rc
