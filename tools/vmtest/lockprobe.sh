#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Diagnostic (not a test): which kernel locks a 64-byte `qperf -cm1
# rc_lat` contends on, rsiw against siw in one boot, two namespaces joined
# by veth. The lock:contention_begin tracepoint with a stack trace per
# event, over SECONDS of rc_lat each; prints the contentions per message
# and the most frequent call stacks (the top frames). Under TCG a
# contended spinlock is dear: every `pause` of its spin ends the vCPU's
# run (tools/qemu-plugin/insncount.c counts them).
#   scripts/vm-run.sh --append kunit.enable=0 -- tools/vmtest/lockprobe.sh TREE [SECONDS]
set -u
. "$(dirname "$0")/lib.sh"
tree=$1 secs=${2:-4}
A=10.98.0.1 B=10.98.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
T=/sys/kernel/tracing
mount -t tracefs nodev $T 2>/dev/null
[ -d $T/events/lock/contention_begin ] || { echo "lockprobe: no lock:contention_begin tracepoint"; exit 1; }
bench_netns $A $B || { echo "lockprobe: no namespaces"; exit 1; }
modprobe siw || exit 1
insmod "$tree/rsiw.ko" || exit 1
for impl in rsiw siw; do
	if [ $impl = rsiw ]; then export RDMAV_DRIVERS=$tree/tools/provider/librsiw; else unset RDMAV_DRIVERS; fi
	ina rdma link add ${impl}0 type $impl netdev bcA && inb rdma link add ${impl}1 type $impl netdev bcB || exit 1
	ina qperf >/dev/null 2>&1 &
	qs=$!
	sleep 1
	echo 8192 > $T/buffer_size_kb
	echo > $T/trace
	echo stacktrace > $T/events/lock/contention_begin/trigger
	echo 1 > $T/events/lock/contention_begin/enable
	out=$(inb qperf -t "$secs" -vv -cm1 -m 64 $A rc_lat 2>&1)
	echo 0 > $T/events/lock/contention_begin/enable
	echo '!stacktrace' > $T/events/lock/contention_begin/trigger
	kill $qs
	wait $qs 2>/dev/null
	msgs=$(qperf_msgs <<<"$out")
	lat=$(qperf_us <<<"$out")
	cp $T/trace "$RSIW_VM_OUT/lockprobe-$impl.txt"
	n=$(grep -c 'contention_begin:' "$RSIW_VM_OUT/lockprobe-$impl.txt")
	echo "lockprobe: $impl: ${msgs:-?} messages, latency ${lat:-?} us, $n contentions"
	# The stack after each event: its first 6 frames, counted.
	awk '/contention_begin:/ { if (s != "") print s; s = ""; k = 0; f = $0; sub(/.*flags=/, "", f); s = "[" f "]"; next }
		/^ *=> / { if (k < 6) { sub(/^ *=> /, ""); s = s " < " $0 }; k++ }
		END { if (s != "") print s }' "$RSIW_VM_OUT/lockprobe-$impl.txt" |
		sort | uniq -c | sort -rn | head -8 | sed "s/^/lockprobe: $impl: /"
	rdma link delete ${impl}0
	rdma link delete ${impl}1
done
rmmod rsiw
