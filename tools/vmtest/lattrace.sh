#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Diagnostic (not a test): where a 64-byte qperf rc_lat message's time
# goes, phase by phase, rsiw then siw in one boot, two namespaces joined by
# veth. tracefs events (raw_syscalls of qperf, net, sched, irq) over 0.3 s
# of each run; the traces stay in $OUT/lattrace-IMPL.txt. Per message:
#   tx:    the sender's doorbell system call -> the packet on the veth
#   rx:    the packet -> the receiver woken (TCP, the driver's RX, CQ)
#   sched: woken -> its read() of the completion channel returns
#   user:  read() returned -> its next doorbell (poll, post)
# means in µs with tracing on (it slows everything; compare the columns).
#   scripts/vm-run.sh --append kunit.enable=0 -- tools/vmtest/lattrace.sh
# (Documentation/performance.md, "Latency, 2026-11-26").
set -u
. "$(dirname "$0")/lib.sh"
R=$RSIW_ROOT
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
bench_netns 10.98.0.1 10.98.0.2 || { echo "lattrace: no namespaces"; exit 1; }
insmod "$R/rsiw.ko" || exit 1
modprobe siw || exit 1
# The server forks per test: it needs rsiw's provider from the start.
export RDMAV_DRIVERS=$R/tools/provider/librsiw
T=/sys/kernel/tracing
mount -t tracefs nodev $T 2>/dev/null
ina qperf >/dev/null 2>&1 &
qs=$!
sleep 1
echo 8192 >$T/buffer_size_kb
events="sched/sched_switch sched/sched_wakeup net/net_dev_queue net/netif_rx net/netif_receive_skb
	irq/softirq_entry irq/softirq_exit raw_syscalls/sys_enter raw_syscalls/sys_exit"
for impl in rsiw siw; do
	ina rdma link add ${impl}0 type $impl netdev bcA
	inb rdma link add ${impl}1 type $impl netdev bcB
	echo 0 >$T/tracing_on
	echo >$T/trace
	for e in $events; do echo 1 >$T/events/$e/enable; done
	echo 'comm ~ "qperf*"' >$T/events/raw_syscalls/sys_enter/filter
	echo 'comm ~ "qperf*"' >$T/events/raw_syscalls/sys_exit/filter
	(sleep 1.5; echo 1 >$T/tracing_on; sleep 0.3; echo 0 >$T/tracing_on) &
	tp=$!
	lat=$(inb qperf -t 3 -cm1 -m 64 10.98.0.1 rc_lat 2>&1 | awk '/latency/ {print $3, $4}')
	wait $tp
	cp $T/trace "$OUT/lattrace-$impl.txt"
	for e in $events; do echo 0 >$T/events/$e/enable; done
	rdma link delete ${impl}0
	rdma link delete ${impl}1
	# The doorbell: the first system call of a message other than read
	# (rsiw: write, or ioctl before 2026-11-26; siw: write).
	awk -v impl=$impl -v lat="$lat" '
	{ t = $4; sub(":", "", t); t *= 1e6; pid = $1; sub(/.*-/, "", pid) }
	$5 == "sys_enter:" && $7 != "0" { db[pid] = t; if (st == "user" && pid == woken) { u += t - rt; nu++; st = "" } }
	$5 == "net_dev_queue:" && (pid in db) { tx += t - db[pid]; ntx++; qt = t; st = "rx" }
	$5 == "sched_wakeup:" && $6 ~ /comm=qperf/ && st == "rx" { rx += t - qt; nrx++; wt = t; w = $7; sub("pid=", "", w); woken = w; st = "sched" }
	$5 == "sys_exit:" && $7 == "0" && st == "sched" && pid == woken { s += t - wt; ns++; rt = t; st = "user" }
	END { if (ntx && nrx && ns && nu)
		printf "lattrace: %s (latency %s): tx %.1f  rx %.1f  sched %.1f  user %.1f  sum %.1f us over %d messages\n",
			impl, lat, tx / ntx, rx / nrx, s / ns, u / nu, tx / ntx + rx / nrx + s / ns + u / nu, ntx
	      else printf "lattrace: %s: too few events\n", impl }' "$OUT/lattrace-$impl.txt"
done
kill $qs
wait $qs 2>/dev/null
