#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Diagnostic (not a test): where the CPU time of a 64-byte qperf rc_lat
# goes, rsiw against siw, by sampling (perf record -e cpu-clock, the
# hrtimer software event: no PMU under TCG), two namespaces joined by
# veth, each implementation twice in one boot. Prints each run's latency,
# the share of samples by object (kernel, rsiw.ko, siw.ko, libraries,
# qperf, idle), the top symbols and the inclusive shares of the message
# path's entry points (doorbell, TCP, softirq, the drivers' callbacks);
# perf.data and the full reports stay in
# $OUT/profile-IMPL-N.*. Needs perf on the host (Debian linux-perf; the
# guest's root is the host's).
#   scripts/vm-run.sh --append kunit.enable=0 -- bench/profile.sh [SECONDS]
# PROFILE_TEST=ib_write_bw|ib_read_bw|ib_send_bw: 64 KiB perftest (-R)
# bandwidth instead, PROFILE_ITERS messages (default 3000) under perf;
# prints each run's wall-clock time and MB/s.
# (Documentation/performance.md, "Where rsiw's latency goes").
set -u
. "$(dirname "$0")/../tests/common/lib.sh"
R=${RSIW_ROOT}
secs=${1:-4}
test=${PROFILE_TEST:-rc_lat}
iters=${PROFILE_ITERS:-3000}
A=10.98.0.1; B=10.98.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
command -v perf >/dev/null || { echo "not ok - perf is installed (apt install linux-perf)"; exit 1; }
sysctl -qw kernel.perf_event_paranoid=-1 kernel.kptr_restrict=0
bench_netns $A $B
insmod $R/rsiw.ko; modprobe siw
W=$(mktemp -d)
n=0
for impl in rsiw siw rsiw siw; do
	n=$((n + 1))
	ina rdma link add ${impl}0 type $impl netdev bcA
	inb rdma link add ${impl}1 type $impl netdev bcB
	if [ $impl = rsiw ]; then export RDMAV_DRIVERS=$R/providers/rsiw/librsiw; else unset RDMAV_DRIVERS; fi
	if [ "$test" = rc_lat ]; then
		ina qperf >/dev/null 2>&1 & qs=$!
		sleep 1
		perf record -q -a -g -e cpu-clock -o $W/perf.data -- \
			ip netns exec bB qperf -t "$secs" -cm1 -m 64 $A rc_lat >$W/qperf.txt 2>&1
		lat=$(awk '/latency/ {print $3, $4}' $W/qperf.txt)
	else
		ina timeout 300 $test -R -F -d ${impl}0 -s 65536 -n $iters >/dev/null 2>&1 & qs=$!
		sleep 2
		t0=$(date +%s.%N)
		perf record -q -a -g -e cpu-clock -o $W/perf.data -- \
			ip netns exec bB timeout 300 $test -R -F -d ${impl}1 --source_ip $B -s 65536 -n $iters $A >$W/qperf.txt 2>&1
		t1=$(date +%s.%N)
		lat=$(awk -v a=$t0 -v b=$t1 -v n=$iters 'BEGIN { printf "%.2f s for %d x 64 KiB (%.1f MB/s with setup)", b - a, n, n * 65536 / (b - a) / 1e6 }')
	fi
	kill $qs 2>/dev/null; wait $qs 2>/dev/null
	rdma link delete ${impl}0; rdma link delete ${impl}1
	p=$OUT/profile-$impl-$n
	perf report -i $W/perf.data --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep . >$p.dso.txt
	perf report -i $W/perf.data --no-children --sort dso,sym -g none --stdio 2>/dev/null | grep -v '^#' | grep . >$p.sym.txt
	perf report -i $W/perf.data --no-children --sort sym -g caller,0.5,callee --percent-limit 2 --stdio 2>/dev/null >$p.graph.txt
	# Who holds interrupts off (a sample waits for the unlock), and
	# where in rsiw.ko the samples fall (symbol+offset, for objdump).
	perf report -i $W/perf.data --no-children -S _raw_spin_unlock_irq_enable,_raw_spin_unlock_irqrestore \
		-g caller,0,callee,function,percent --stdio 2>/dev/null >$p.irqoff.txt
	perf script -i $W/perf.data -F ip,sym,symoff,dso -G 2>/dev/null | awk '/\[rsiw\]|rsiw\.ko/ {print $2}' |
		sort | uniq -c | sort -rn >$p.offsets.txt
	# Inclusive shares: the post path (the doorbell system call down to
	# the veth), the receive path (softirq, TCP, the driver's callback)
	# and the wakeup, for rsiw and siw alike.
	perf report -i $W/perf.data --children --sort sym -g none --stdio 2>/dev/null | grep -v '^#' | grep . >$p.children.txt
	cp $W/qperf.txt $p.qperf.txt
	echo "== $impl run $n ($test): $lat, $(perf report -i $W/perf.data --stdio 2>/dev/null | sed -n 's/^# Samples: \([^ ]*\).*/\1/p' | head -1) samples"
	echo "-- by object:"; head -8 $p.dso.txt
	echo "-- top symbols:"; head -30 $p.sym.txt
	echo "-- inclusive (children) of the message path:"
	grep -E ' (ksys_write|ksys_ioctl|ib_uverbs_write|ib_uverbs_ioctl|ib_uverbs_post_send|ib_uverbs_post_recv|tcp_sendmsg|tcp_sendmsg_locked|__dev_queue_xmit|net_rx_action|__netif_receive_skb_core.*|tcp_v4_rcv|tcp_rcv_established|tcp_read_sock|__tcp_read_sock|ib_uverbs_comp_handler|ib_uverbs_event_read|try_to_wake_up|schedule|.*data_ready.*|.*doorbell.*|.*tx_rounds.*|.*tx_round_copy.*|.*rx_queued.*|siw_.*)$' $p.children.txt | head -40
	rm -f $W/perf.data
done
rm -rf "$W"
