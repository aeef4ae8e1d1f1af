#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Diagnostic (not a test): the guest instructions (and, with the plugin's
# mem=on, kernel data pages) a 64-byte perftest latency message costs, for
# rsiw and for Linux siw in one boot, counted by the insncount QEMU plugin
# (bench/qemu-plugin). Two namespaces joined by veth. For each driver and
# each iteration count in ITERS, one window around one perftest run (the
# client's process, the connection, ITERS round trips, the teardown; the
# server is started and listening before the window opens): the
# difference of two windows is the cost of the extra messages alone.
#   make -C bench/qemu-plugin
#   scripts/vm-run.sh --plugin bench/qemu-plugin/insncount.so,out=FILE --append kunit.enable=0 \
#       -- bench/insncount.sh TREE [ITERS...]
#   bench/qemu-plugin/insncount.py FILE OUTDIR/insncount-manifest.txt OUTDIR/kallsyms
# TREE holds rsiw.ko and providers/rsiw (outside /tmp: the guest hides it).
# INSN_TOOL (default ib_send_lat) is the perftest latency tool;
# INSN_EVENTS=1 makes both ends sleep on completion events (-e) rather
# than busy-poll, as qperf's rc_lat does. INSN_TOOL=qperf: qperf -cm1
# rc_lat itself, ITERS then being seconds per run and the round trips
# qperf's count of messages sent. INSN_MTU sets the veth MTU, INSN_SIZE
# perftest's message size (default 64). INSN_TOOL=qpbench: one
# rsiw-qpbench stream (bench/qpbench), INSN_QPB="MODE DEPTH" (default
# "send 4") of INSN_SIZE octets (default there 65536), ITERS being seconds
# per run and the messages the client's octets over the size: a steady
# bandwidth row's cost per message, beside siw's.
set -u
. "$(dirname "$0")/../tests/common/lib.sh"
tree=$1
shift
iters=${*:-1000 3000}
tool=${INSN_TOOL:-ib_send_lat}
size=${INSN_SIZE:-64}
ev=
[ "${INSN_EVENTS:-0}" = 1 ] && ev=-e
A=10.98.0.1 B=10.98.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
mark=$RSIW_ROOT/bench/qemu-plugin/marker
[ "$tool" = qperf ] || [ "$tool" = qpbench ] || [ -f "$PERFTEST_SHIM" ] || { echo "insncount: no $PERFTEST_SHIM (make -C providers/rsiw)"; exit 1; }
[ -x "$mark" ] || { echo "insncount: no $mark (make -C bench/qemu-plugin)"; exit 1; }
bench_netns $A $B || { echo "insncount: no namespaces"; exit 1; }
if [ -n "${INSN_MTU:-}" ]; then
	ina ip link set bcA mtu "$INSN_MTU" && inb ip link set bcB mtu "$INSN_MTU" || exit 1
fi
modprobe siw || { echo "insncount: no siw"; exit 1; }
# Fixed user-space addresses: the same object at the same place in every
# run (the guest's own setting; the host's is untouched).
sysctl -qw kernel.randomize_va_space=0
insmod "$tree/rsiw.ko" || { echo "insncount: insmod failed"; exit 1; }
cat /proc/kallsyms >"$RSIW_VM_OUT/kallsyms"
man=$RSIW_VM_OUT/insncount-manifest.txt
: >"$man"
w=0
rc=0
for impl in rsiw siw; do
	if [ $impl = rsiw ]; then export RDMAV_DRIVERS=$tree/providers/rsiw/librsiw; else unset RDMAV_DRIVERS; fi
	ina rdma link add ${impl}0 type $impl netdev bcA && inb rdma link add ${impl}1 type $impl netdev bcB || exit 1
	if [ "$tool" = qperf ]; then
		ina qperf >/dev/null 2>&1 &
		qs=$!
		sleep 1
		for t in $iters; do
			"$mark" start
			inb qperf -t "$t" -vv -cm1 -m 64 $A rc_lat >"$RSIW_VM_OUT/insn-$impl-$t.txt" 2>&1
			crc=$?
			"$mark" stop
			w=$((w + 1))
			n=$(qperf_msgs <"$RSIW_VM_OUT/insn-$impl-$t.txt")
			lat=$(qperf_us <"$RSIW_VM_OUT/insn-$impl-$t.txt")
			echo "$w $impl ${n:-0} ${lat:-?}" >>"$man"
			echo "insncount: window $w: $impl, qperf ${t} s, ${n:-?} messages, client $crc, latency ${lat:-?} us"
			[ $crc = 0 ] && [ -n "$n" ] || rc=1
		done
		kill $qs
		wait $qs 2>/dev/null
	elif [ "$tool" = qpbench ]; then
		read -r qmode qdepth <<<"${INSN_QPB:-send 4}"
		qsize=$size
		[ "$qsize" = 64 ] && qsize=65536
		port=20000
		for t in $iters; do
			port=$((port + 1))
			ina timeout 120 "$RSIW_ROOT/bench/qpbench/rsiw-qpbench" server -a $A -p $port -n 1 -m "$qmode" \
				-d "$qdepth" -s "$qsize" >"$RSIW_VM_OUT/insn-$impl-$t-server.txt" 2>&1 &
			s=$!
			wait_for 30 listening $port bA
			"$mark" start
			inb timeout 120 "$RSIW_ROOT/bench/qpbench/rsiw-qpbench" client -a $A -b $B -p $port -n 1 -m "$qmode" \
				-d "$qdepth" -s "$qsize" -t "$t" >"$RSIW_VM_OUT/insn-$impl-$t.txt" 2>&1
			crc=$?
			wait $s
			src=$?
			"$mark" stop
			w=$((w + 1))
			bytes=$(awk '$1 == "qp" && $3 == "bytes" { print $4 }' "$RSIW_VM_OUT/insn-$impl-$t.txt")
			n=$(( ${bytes:-0} / qsize ))
			mbps=$(awk '$1 == "aggregate_mbps" { print $2 }' "$RSIW_VM_OUT/insn-$impl-$t.txt")
			echo "$w $impl $n ${mbps:-?}" >>"$man"
			echo "insncount: window $w: $impl, qpbench $qmode $qdepth x $qsize for ${t} s, $n messages, $(grep ^cpus_busy "$RSIW_VM_OUT/insn-$impl-$t.txt"), client $crc server $src, ${mbps:-?} MB/s"
			[ $crc = 0 ] && [ $src = 0 ] && [ "$n" -gt 0 ] || rc=1
		done
	else
		for n in $iters; do
			ina timeout 120 $tool -R $ev -d ${impl}0 -s "$size" -n "$n" >"$RSIW_VM_OUT/insn-$impl-$n-server.txt" 2>&1 &
			s=$!
			wait_for 30 listening 18515 bA
			sleep 0.5
			"$mark" start
			inb env LD_PRELOAD="$PERFTEST_SHIM" timeout 120 $tool -R $ev -d ${impl}1 --source_ip $B -s "$size" -n "$n" $A \
				>"$RSIW_VM_OUT/insn-$impl-$n.txt" 2>&1 &
			c=$!
			# The processes' mappings (no address randomisation here), for
			# insncount.py to name user-space code by object.
			sleep 1
			for p in $(pgrep -x "$tool"); do cat /proc/$p/maps; done >"$RSIW_VM_OUT/maps-$impl-$n.txt" 2>/dev/null
			wait $c
			crc=$?
			wait $s
			src=$?
			"$mark" stop
			w=$((w + 1))
			lat=$(awk '$1 == 64 { v = $6 } END { print v }' "$RSIW_VM_OUT/insn-$impl-$n.txt")
			echo "$w $impl $n ${lat:-?}" >>"$man"
			echo "insncount: window $w: $impl, $n iterations, client $crc server $src, t_avg ${lat:-?} us"
			[ $crc = 0 ] && [ $src = 0 ] || rc=1
		done
	fi
	rdma link delete ${impl}0
	rdma link delete ${impl}1
done
rmmod rsiw
exit $rc
