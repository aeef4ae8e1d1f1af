#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Diagnostic (not a test): where a 64-byte qperf rc_lat message's time
# goes, rsiw against siw, counted rather than timed (TCG): context
# switches, wakeups by task, and rsiw TX work items queued and by whom,
# from tracefs over a 2 s rc_lat, twice each, two namespaces joined by veth;
# and per doorbell (uverbs POST_SEND, one per message for both drivers):
# completion events (the uverbs completion handler's allocations), wakeups
# of qperf and qperf's system calls.
#   scripts/vm-run.sh --append kunit.enable=0 -- tools/vmtest/latprobe.sh
# (Documentation/performance.md, "Shared rings against uverbs commands").
set -u
. "$(dirname "$0")/lib.sh"
R=${RSIW_ROOT}
A=10.98.0.1; B=10.98.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
bench_netns $A $B
insmod $R/rsiw.ko; modprobe siw
T=/sys/kernel/tracing
mount -t tracefs nodev $T 2>/dev/null
echo 32768 > $T/buffer_size_kb
for impl in rsiw siw rsiw siw; do
	ina rdma link add ${impl}0 type $impl netdev bcA
	inb rdma link add ${impl}1 type $impl netdev bcB
	if [ $impl = rsiw ]; then export RDMAV_DRIVERS=$R/tools/provider/librsiw; else unset RDMAV_DRIVERS; fi
	ina qperf >/dev/null 2>&1 & qs=$!
	sleep 1
	echo 0 > $T/tracing_on; echo > $T/trace
	echo 1 > $T/events/workqueue/workqueue_queue_work/enable
	echo 1 > $T/events/workqueue/workqueue_execute_start/enable
	echo 1 > $T/events/sched/sched_wakeup/enable
	echo 1 > $T/events/sched/sched_switch/enable
	echo 1 > $T/events/kmem/kmalloc/enable
	echo 1 > $T/events/raw_syscalls/sys_enter/enable
	c0=$(awk '/^ctxt/ {print $2}' /proc/stat)
	echo 1 > $T/tracing_on
	out=$(inb qperf -t 2 -cm1 -m 64 $A rc_lat 2>&1)
	echo 0 > $T/tracing_on
	c1=$(awk '/^ctxt/ {print $2}' /proc/stat)
	lat=$(echo "$out" | awk '/latency/ {print $3, $4}')
	# messages: 2 s / latency (one-way) per direction ~ round trips = 2s/(2*lat)
	qw=$(grep -c "workqueue_queue_work.*rsiw_tx" $T/trace)
	qwall=$(grep -c "workqueue_queue_work" $T/trace)
	wk=$(grep -c "sched_wakeup" $T/trace)
	sw=$(grep -c "sched_switch" $T/trace)
	echo "$impl: latency $lat ctxt $((c1 - c0)) rsiw_tx-queued $qw all-queued $qwall wakeups $wk switches $sw"
	db=$(grep -c "kmalloc.*call_site=ib_uverbs_post_send" $T/trace)
	ev=$(grep -c "kmalloc.*call_site=ib_uverbs_comp_handler" $T/trace)
	qwk=$(grep "sched_wakeup" $T/trace | grep -c "comm=qperf")
	sc=$(grep "sys_enter" $T/trace | grep -c "^ *qperf-")
	lost=$(grep -c "LOST" $T/trace)
	awk -v i=$impl -v d="$db" -v e="$ev" -v w="$qwk" -v s="$sc" -v l="$lost" 'BEGIN {
		if (d == 0) { print "  " i ": no doorbells traced"; exit }
		printf "  %s per doorbell (%d doorbells%s): completion events %.2f, qperf wakeups %.2f, qperf system calls %.2f\n",
			i, d, (l > 0 ? ", trace lost events" : ""), e / d, w / d, s / d }'
	echo "  rsiw_tx queued by:"; grep "workqueue_queue_work.*rsiw_tx" $T/trace | awk '{print $1, $3}' | sed 's/-[0-9]* / /' | sort | uniq -c | sort -rn | head -6
	echo "  wakeups of:"
	grep "sched_wakeup" $T/trace | sed 's/.*comm=\([^ ]*\) .*/\1/' | sed 's/[0-9]*$//' | sort | uniq -c | sort -rn | head -6
	for e in workqueue/workqueue_queue_work workqueue/workqueue_execute_start sched/sched_wakeup sched/sched_switch kmem/kmalloc raw_syscalls/sys_enter; do echo 0 > $T/events/$e/enable; done
	kill $qs; wait $qs 2>/dev/null
	rdma link delete ${impl}0; rdma link delete ${impl}1
done
