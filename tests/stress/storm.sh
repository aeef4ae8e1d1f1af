#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Connection storms: rdma_cm connect / one round of
# traffic (a Send each way, an RDMA Write whose data is checked) /
# disconnect / destroy cycles, each bounded by a timeout and counted,
# sequentially and 16 at a time, rsiw<->rsiw and rsiw<->siw with either
# side the server. Then nothing leaked: the RDMA core's object counts,
# allocated and established TCP sockets back to their baseline,
# unreclaimable slab within a tolerance, dmesg clean.
#
#   storm.sh        short form (the test command): 1 800 cycles
#   storm.sh long   long form: 18 000 cycles (vm-run.sh --timeout 1800)
#
# Two namespaces: n1 and n2, joined by two veth pairs: rsp1/rsp2
# (10.97.1.0/24) with rsiw0 and rsiw1, rsq1/rsq2 (10.97.2.0/24) with
# rsiw2 and siw0 (Linux siw: MPA CRC compiled off; rsiw's default
# mpa_crc=0 interoperates).
set -u
. "$(dirname "$0")/../common/lib.sh"
. "$(dirname "$0")/../common/stress-lib.sh"

scale=1
[ "${1:-}" = long ] && scale=10

dmesg -C
# zcopy_local=1: zero-copy TX over the veth pair too (rsiw copies on
# local routes by default): connections torn down with pages TCP holds.
# STORM_MODPARAMS: more rsiw module parameters for both loads (e.g.
# fpdu_segs_local=1 to compare FPDU sizes).
setup "insmod rsiw.ko zcopy_local=1 ${STORM_MODPARAMS:-}" insmod "$RSIW_ROOT/rsiw.ko" zcopy_local=1 ${STORM_MODPARAMS:-}
setup "modprobe siw" modprobe siw
setup "namespaces n1 and n2" stress_namespaces
setup "veth rsp1 (n1) <-> rsp2 (n2)" veth_pair rsp1 rsp2 10.97.1
setup "veth rsq1 (n1) <-> rsq2 (n2)" veth_pair rsq1 rsq2 10.97.2
setup "rdma link add rsiw0 on rsp1" in1 rdma link add rsiw0 type rsiw netdev rsp1
setup "rdma link add rsiw1 on rsp2" in2 rdma link add rsiw1 type rsiw netdev rsp2
setup "rdma link add rsiw2 on rsq1" in1 rdma link add rsiw2 type rsiw netdev rsq1
setup "rdma link add siw0 on rsq2" in2 rdma link add siw0 type siw netdev rsq2
# 10 s: a port is ACTIVE as soon as its netdev is up (well under a
# second); TF for the debug kernel.
for d in rsiw0 rsiw1 rsiw2 siw0; do
	setup "$d port ACTIVE" wait_for $((10 * TF)) port_active $d
done

# storm NAME SERVER_NS SERVER_ADDR CLIENT_NS CLIENT_ADDR SEQ CONC: a
# server, SEQ cycles one at a time, then CONC cycles 16 at a time.
port=7470
total=0
storm() {
	local name=$1 sns=$2 sa=$3 cns=$4 ca=$5 seq=$6 conc=$7 n c line
	port=$((port + 1))
	check "$name: server listens" start_server "$sns" "$sa" $port "$OUT/storm-$name-server.txt"
	for run in "$seq 1" "$conc 16"; do
		set -- $run
		n=$1 c=$2
		# A cycle takes about 0.4 s one at a time on the lean kernel
		# (100 in 42 s), so 3 s a cycle plus 60 s bounds the run with a
		# wide margin; each cycle has its own 20 s bound (-t) besides,
		# ten times its usual time even on the debug kernel.
		ip netns exec "$cns" timeout $(((60 + n * 3) * TF)) "$STORM" client -a "$sa" -b "$ca" -p $port \
			-n "$n" -c "$c" -t 20 >"$OUT/storm-$name-$c.txt" 2>&1
		local rc=$?
		line=$(grep '^cycles:' "$OUT/storm-$name-$c.txt")
		echo "# $name, $c at a time: $line"
		grep '^# cycle' "$OUT/storm-$name-$c.txt" | head -5
		if [ -z "$quirk" ]; then
			expect_eq "$name: $n cycles $c at a time: all ok, 0 failed, 0 timed out" \
				"cycles: $n ok, 0 failed, 0 timed out" "$(echo "$line" | sed 's/ (.*//')"
			expect_eq "$name: $n cycles $c at a time: the client exits 0" 0 $rc
		else
			check "$name: $n cycles $c at a time: none failed, every one ended in its bound" \
				grep -qE "^cycles: [0-9]+ ok, 0 failed, [0-9]+ timed out" "$OUT/storm-$name-$c.txt"
			timedout=$((timedout + $(echo "$line" | awk '{print $6}')))
		fi
		total=$((total + $(echo "$line" | awk '{print $2}')))
	done
	if [ -z "$quirk" ]; then
		stop_server "$name"
	else
		kill -TERM "$server"
		# 30 s: the server ends within a second of SIGTERM.
		check "$name: the server ends on SIGTERM" wait_for $((30 * TF)) bash -c "! kill -0 $server 2>/dev/null"
		wait "$server"
	fi
	line=$(grep '^server:' "$OUT/storm-$name-server.txt")
	echo "# $name: $line"
	local served
	served=$(echo "$line" | sed -n 's/.* \([0-9]*\) rounds served.*/\1/p')
	if [ -z "$quirk" ]; then
		expect_eq "$name: the server served every cycle, once" $((seq + conc)) "$served"
	else
		# A cycle siw dropped may or may not have reached its server.
		check "$name: the server served every cycle at most once, all but the timed-out ones" \
			[ "${served:-0}" -le $((seq + conc)) -a "${served:-0}" -ge $((seq + conc - timedout)) ]
	fi
}
quirk=
timedout=0

# Warm-up (first-use allocations are not leaks), then the baseline.
storm warmup-rsiw n1 10.97.1.1 n2 10.97.1.2 10 16
storm warmup-siw n1 10.97.2.1 n2 10.97.2.2 10 16
total=0
res0=$(res_counts)
alloc0=$(tcp_alloc)
sunr0=$(meminfo_kb SUnreclaim)
tcp0=$(slab_objs TCP)
echo "# baseline: $res0"
echo "# baseline: TCP sockets allocated $alloc0, SUnreclaim $sunr0 kB${tcp0:+, TCP slab objects $tcp0}"

t0=$(date +%s)
storm rsiw-rsiw n1 10.97.1.1 n2 10.97.1.2 $((200 * scale)) $((400 * scale))
# The same again: a steady state must not grow (a leak grows per cycle).
sunr1=$(sunreclaim_settled)
storm rsiw-rsiw-again n1 10.97.1.1 n2 10.97.1.2 $((200 * scale)) $((400 * scale))
sunr2=$(sunreclaim_settled)
echo "# SUnreclaim: $sunr0 kB at the baseline, $sunr1 kB after $((600 * scale)) rsiw cycles, $sunr2 kB after $((600 * scale)) more"
# Noise is about half a MiB (the long form: +104 kB, then +552 kB for
# 6 000 cycles each); a leak of 2 kB a cycle would pass 1 MiB in 600.
# On a debug kernel KASAN's quarantine holds freed objects back (+1.3 MiB
# for the second 600 cycles there): kmemleak's scan in check_dmesg_clean
# decides, as in uvfuzz.sh and soak-kernel.sh.
slab_check "unreclaimable slab: the second $((600 * scale)) rsiw cycles grew it by under 1 MiB" [ $((sunr2 - sunr1)) -lt 1024 ]
storm rsiw-server-siw-client n1 10.97.2.1 n2 10.97.2.2 $((100 * scale)) $((200 * scale))
# rsiw initiating to a siw responder: client-server mode (p2p_rtr=0). In
# peer-to-peer mode siw as responder misses an RTR that arrives before it
# armed its RTR path and later reports CLOSE to iw_cm in CONN_RECV, which
# iw_cm BUG()s on (Documentation/usage.md); this storm hits that within
# about 100 cycles 16 at a time. rsiw is reloaded with p2p_rtr=0 for it.
relink() {
	for d in rsiw0 rsiw1 rsiw2; do rdma link delete $d || return 1; done
	rmmod rsiw && insmod "$RSIW_ROOT/rsiw.ko" p2p_rtr=0 ${STORM_MODPARAMS:-} &&
		in1 rdma link add rsiw0 type rsiw netdev rsp1 &&
		in2 rdma link add rsiw1 type rsiw netdev rsp2 &&
		in1 rdma link add rsiw2 type rsiw netdev rsq1 &&
		wait_for 10 port_active rsiw2
}
setup "rsiw reloaded with p2p_rtr=0, its devices back" relink
# siw as responder also fails a reply Send now and then with
# IBV_WC_LOC_QP_OP_ERR and IBV_EVENT_QP_FATAL on its own QP while the
# TCP stream stays up (no Terminate, no close), and its accept can miss a
# first FPDU that arrives before it moved the socket to its data path
# (nothing more comes in a storm cycle): the rsiw client waits for a reply
# that never comes, times the cycle out and tears it down. Such cycles are
# counted and bounded; none may fail otherwise. The bound: 1 cycle in 20
# on the lean kernel, where 6 and 9 of 300 timed out (2-3 %); 1 in 10 on
# the debug kernel, where 14 of 300 did (its slower steps widen siw's
# windows). More is a regression, of rsiw's client as likely as of siw.
lost_div=20
debug_kernel && lost_div=10
quirk=siw
storm siw-server-rsiw-client n2 10.97.2.2 n1 10.97.2.1 $((100 * scale)) $((200 * scale))
quirk=
siw_errors=$(sed -n 's/.* \([0-9]*\) errors,.*/\1/p' "$OUT/storm-siw-server-rsiw-client-server.txt")
echo "# siw-server-rsiw-client: $timedout cycles timed out, the siw server reported ${siw_errors:-?} local QP errors"
check "siw-server-rsiw-client: at most 1 cycle in $lost_div lost to siw ($timedout of $((300 * scale)))" \
	[ "$timedout" -le $((300 * scale / lost_div)) ]
t1=$(date +%s)
# (No check of the total: the runs above already require every cycle.)
echo "# storm: $total cycles in $((t1 - t0)) s"

# Nothing left behind.
no_established() { [ "$(established)" = 0 ]; }
res_back() { [ "$(res_counts)" = "$res0" ]; }
alloc_back() { [ "$(tcp_alloc)" -le "$alloc0" ]; }
# 30 s: the connections close within a second or two of their cycles'
# end; an allocated socket lasts until TCP's close handshake ends, and an
# orphan in FIN_WAIT2 until tcp_fin_timeout (60 s), hence 90 s. TF for
# the debug kernel.
check "no established TCP socket left (n1, n2)" wait_for $((30 * TF)) no_established
check "RDMA objects back to the baseline (rdma resource show)" wait_for $((30 * TF)) res_back
res1=$(res_counts)
[ "$res1" = "$res0" ] || echo "# after: $res1"
check "TCP sockets allocated back to the baseline ($alloc0)" wait_for $((90 * TF)) alloc_back
echo "# after: TCP sockets allocated $(tcp_alloc)"
sunr3=$(sunreclaim_settled)
echo "# after: SUnreclaim $sunr3 kB (baseline $sunr0 kB, $((sunr3 - sunr0)) kB over $total cycles and a module reload)"

check_base "rdma link delete siw0" in2 rdma link delete siw0
check "rdma link delete rsiw0, rsiw1, rsiw2" bash -c 'for d in rsiw0 rsiw1 rsiw2; do rdma link delete $d || exit 1; done'
check "rmmod rsiw" rmmod rsiw
check_base "rmmod siw" rmmod siw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
