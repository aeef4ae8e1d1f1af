#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Unchanged rdma-core applications over rsiw, through its provider
# (providers/rsiw): two rsiw devices on the ends of a veth pair, one
# program on each (rdma_cm picks the device by address; traffic between
# two local addresses goes over lo). Then middleware, on two more devices
# in two network namespaces joined by veth: libfabric's verbs provider,
# librdmacm's rsockets and Open MPI over libfabric.
set -u
. "$(dirname "$0")/../common/lib.sh"

export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"
a=10.97.0.1
b=10.97.0.2
setup "veth pair rsiwu0/rsiwu1" local_veth rsiwu0 $a rsiwu1 $b
# Bounds: a server listens (or its listener is gone) within a second on
# the lean kernel: 30 s, times TF on the debug kernel. Each program's own
# timeout (120-300 s, for runs of a few seconds) only keeps a hang from
# taking the guest's whole limit.

# A client started before its server listens (lib.sh's `listening`) is
# refused.
# The previous server's listener is gone (an iWARP listener is a kernel
# socket the CM closes after the process has exited: a client started
# while it lingers could reach it instead of the next server's): lib.sh's
# `not_listening`.

# A user-space crash leaves its core in $OUT (and fails check_dmesg_clean).
ulimit -c unlimited
echo "$OUT/core.%e.%p" >/proc/sys/kernel/core_pattern

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add rsiw0 on rsiwu0" rdma link add rsiw0 type rsiw netdev rsiwu0
setup "rdma link add rsiw1 on rsiwu1" rdma link add rsiw1 type rsiw netdev rsiwu1

# --- rping: Sends and RDMA Read/Write, every payload checked (-V) ---
rping_verified $a $b 20 "rping client"

# --- what the tools do not check: atomics, Write with Immediate, inline,
# the extended verbs (ibv_wr_*, ibv_start_poll), QP state after create ---
to "$OUT/uverbs-check.txt" "$RSIW_ROOT/tests/progs/rsiw-uverbs-check" $a $b
sed -n 's/^\(not \)\{0,1\}ok - /rsiw-uverbs-check: &/p' "$OUT/uverbs-check.txt"
check "rsiw-uverbs-check: every check passed" grep -qx PASSED "$OUT/uverbs-check.txt"

# --- the shared rings: costs, full rings, wrap-around, CQ overflow, every
# ring op with data checked, hostile entries written into the ring ---
to "$OUT/ring-check.txt" "$RSIW_ROOT/tests/progs/rsiw-ring-check" $a $b
sed -n 's/^\(not \)\{0,1\}ok - /rsiw-ring-check: &/p' "$OUT/ring-check.txt"
check "rsiw-ring-check: every check passed" grep -qx PASSED "$OUT/ring-check.txt"
# The same application over the command path (an ABI 1 style context)
# still passes rsiw-uverbs-check.
to "$OUT/uverbs-check-cmds.txt" env RSIW_NO_RINGS=1 "$RSIW_ROOT/tests/progs/rsiw-uverbs-check" $a $b 7472
check "rsiw-uverbs-check without rings (RSIW_NO_RINGS=1): every check passed" grep -qx PASSED "$OUT/uverbs-check-cmds.txt"

# --- perftest with rdma_cm (-R): Write, Read and Send bandwidth ---
# Read's responses are sent by the server's TX work, a kernel thread: the
# client's rsiw1 reads them in the receive softirq, never in its QP's RX
# work (rx_work_octets). What the RX work took of Write's and Send's
# payload is printed: both perftest ends busy-poll, no CPU is free for the
# work, so after its first late start the softirq reads (checked with an
# event-driven receiver below).
for t in ib_write_bw ib_read_bw ib_send_bw; do
	rxdev=rsiw0
	[ $t = ib_read_bw ] && rxdev=rsiw1
	w0=$(counter $rxdev rx_work_octets)
	perftest_bw $t $a $b rsiw0 rsiw1
	w1=$(counter $rxdev rx_work_octets)
	echo "# $t: $rxdev read $((w1 - w0)) octets in the RX work"
	if [ $t = ib_read_bw ]; then
		expect_eq "$t -R: $rxdev read the responses in the softirq (rx_work_octets unchanged)" 0 $((w1 - w0))
	fi
done



# --- perftest atomics with rdma_cm (-R): FetchAdd and CmpSwap ---
for t in "ib_atomic_bw -A FETCH_AND_ADD" "ib_atomic_bw -A CMP_AND_SWAP" "ib_atomic_lat -A FETCH_AND_ADD"; do
	f=$(echo "$t" | tr ' ' '_')
	wait_for $((30 * TF)) not_listening 18515
	timeout 120 $t -R -d rsiw0 -n 200 >"$OUT/$f-server.txt" 2>&1 &
	server=$!
	wait_for $((30 * TF)) listening 18515
	check "$t -R: the client runs 200 atomics" \
		to "$OUT/$f-client.txt" perftest_client timeout 120 $t -R -d rsiw1 --source_ip $b -n 200 $a
	wait $server
	expect_eq "$t -R: the server exits 0" 0 $?
	# bw: "#bytes #iterations BW-peak BW-average MsgRate": the message
	# rate above 0 (200 atomics of 8 octets on a slow kernel round the MB/s
	# to 0.00); lat: "#bytes #iterations t_min t_max t_typical ...": t_max.
	row=$(grep -E '^ +8 +200 ' "$OUT/$f-client.txt")
	echo "# $t: $(echo "$row" | awk '{print $3, $4, $5}')"
	col=4
	case $t in *_bw*) col=5 ;; esac
	check "$t -R: a result above 0 reported" awk -v v="$(echo "$row" | awk -v c=$col '{print $c}')" 'BEGIN { exit !(v > 0) }'
done

# --- qperf over rdma_cm (-cm1): Send, RDMA Read and Write bandwidth, latency ---
qperf >"$OUT/qperf-server.txt" 2>&1 &
qserver=$!
wait_for $((30 * TF)) listening 19765
check "qperf -cm1 rc_bw rc_lat rc_rdma_read_bw rc_rdma_write_bw" \
	to "$OUT/qperf-client.txt" timeout 180 qperf -cm1 -t 3 $a rc_bw rc_lat rc_rdma_read_bw rc_rdma_write_bw
kill $qserver 2>/dev/null
wait $qserver 2>/dev/null
sed 's/^/# qperf: /' "$OUT/qperf-client.txt"
expect_eq "qperf reported every test" 4 "$(grep -cE '^ +(bw|latency) += +[0-9.]+ ' "$OUT/qperf-client.txt")"

# qperf 0.4.11 (Debian 12's) server crashes after each test, once its
# results are sent: its cm_close calls rdma_destroy_qp on the listening
# cm_id, which has no QP, and librdmacm passes that NULL to
# ibv_destroy_qp. qperf's own bug, on every device (siw's too), fixed
# upstream after 0.4.11 (linux-rdma/qperf 83bc16e, "Use the rdma_cm_id
# from CMINFO rather than from the event"). Each crash must be that one,
# read from its core: ibv_destroy_qp(NULL) called by rdma_destroy_qp.
qperf_known() {
	gdb -q -batch -ex bt -ex 'info registers rdi' /usr/bin/qperf "$1" 2>/dev/null |
		awk '/^#0 .* in ibv_destroy_qp / { a = 1 } /^#1 .* in rdma_destroy_qp / { b = 1 }
		     /^rdi +0x0 / { c = 1 } END { exit !(a && b && c) }'
}
# User-Mode Linux writes cores gdb cannot read ("Core file format not
# supported", any program's): there each crash is read from its kernel
# line instead, a NULL read at the faulting offset of libibverbs, which
# must be inside ibv_destroy_qp (the caller and its argument, which only
# the core shows, go unchecked on that lane).
qperf_known_dmesg() {
	local lib off
	lib=$(echo "$1" | sed -n 's/.* in \(libibverbs[^[]*\)\[\([0-9a-f]*\),.*/\1/p')
	off=$(echo "$1" | sed -n 's/.* in libibverbs[^[]*\[\([0-9a-f]*\),.*/\1/p')
	[ -n "$lib" ] && [ -n "$off" ] || return 1
	lib=$(ls /usr/lib/x86_64-linux-gnu/"$lib" /lib/x86_64-linux-gnu/"$lib" 2>/dev/null | head -1)
	[ -n "$lib" ] && gdb -q -batch -ex "info symbol 0x$off" "$lib" 2>/dev/null | grep -q '^ibv_destroy_qp '
}
crashes=$(dmesg | grep -cE 'qperf\[[0-9]+\]: segfault at 0 ')
known=0
how="core read"
if uml_guest; then
	how="its kernel line read, on UML"
	while read -r line; do
		qperf_known_dmesg "$line" && known=$((known + 1))
	done < <(dmesg | grep -E 'qperf\[[0-9]+\]: segfault at 0 ')
else
	for core in "$OUT"/core.qperf.*; do
		[ -e "$core" ] && qperf_known "$core" && known=$((known + 1))
	done
fi
echo "# qperf server crashes: $crashes, each qperf 0.4.11's rdma_destroy_qp(listening id): $known"
expect_eq "every qperf crash is qperf 0.4.11's cm_close bug ($how)" "$crashes" "$known"
rm -f "$OUT"/core.qperf.*

check "rdma link delete rsiw0" rdma link delete rsiw0
check "rdma link delete rsiw1" rdma link delete rsiw1

# --- libfabric's verbs provider (Debian 12's libfabric 1.17), what MPI
# libraries and other middleware reach RDMA through: its connected (MSG)
# endpoint, and its reliable datagram (RDM) endpoint, ofi_rxm over verbs
# MSG connections, which asks for a CQ of 262 144 entries at its defaults
# (rsiw's max_cqe was 65 536 until that was found). fi_pingpong has no
# source address option, so the two ends are two network namespaces
# joined by veth (between two local addresses of one namespace the
# client's route, and so its device, would be the server's). fi_pingpong
# -c checks every payload; the server on rsiw2, the client on rsiw3, each
# device's cm_established counter must move. ---
setup "namespaces bA and bB joined by veth" bench_netns 10.95.0.1 10.95.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
setup "rdma link add rsiw2 on bcA (namespace bA)" ina rdma link add rsiw2 type rsiw netdev bcA
setup "rdma link add rsiw3 on bcB (namespace bB)" inb rdma link add rsiw3 type rsiw netdev bcB
to "$OUT/fi_info.txt" ina fi_info -p verbs -d rsiw2
check "fi_info: libfabric's verbs provider offers rsiw2 as an iWARP MSG endpoint" \
	grep -q 'protocol: FI_PROTO_IWARP' "$OUT/fi_info.txt"
check "fi_info: and as an RDM endpoint through ofi_rxm" \
	bash -c "ip netns exec bA fi_info -p 'verbs;ofi_rxm' -d rsiw2 -t FI_EP_RDM | grep -q 'domain: rsiw2'"
for ep in "msg verbs 64 1000" "msg verbs 65536 100" "rdm verbs;ofi_rxm 64 1000" "rdm verbs;ofi_rxm 65536 100"; do
	read -r kind prov size n <<<"$ep"
	f="$OUT/fi_pingpong-$kind-$size"
	e0=$(counter rsiw2 cm_established) e1=$(counter rsiw3 cm_established)
	wait_for $((30 * TF)) not_listening 47592 bA
	ina timeout 120 fi_pingpong -p "$prov" -e $kind -d rsiw2 -I $n -S $size -c >"$f-server.txt" 2>&1 &
	server=$!
	wait_for $((30 * TF)) listening 47592 bA
	check "fi_pingpong -e $kind ($prov): $n messages of $size octets, each checked" \
		to "$f-client.txt" inb timeout 120 fi_pingpong -p "$prov" -e $kind -d rsiw3 -I $n -S $size -c 10.95.0.1
	wait $server
	expect_eq "fi_pingpong -e $kind, $size octets: the server exits 0" 0 $?
	# "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec", sizes and
	# counts as 64, 64k, 1k; "#ack" is "=#sent" when every one came back.
	row=$(awk -v s=$size '$1 == s || $1 == s / 1024 "k" { print; exit }' "$f-client.txt")
	echo "# fi_pingpong -e $kind $size B: $(echo "$row" | awk '{print $7}') us per message"
	expect_eq "fi_pingpong -e $kind, $size octets: every message acknowledged" \
		"=$(echo "$row" | awk '{print $2}')" "$(echo "$row" | awk '{print $3}')"
	check "fi_pingpong -e $kind, $size octets: over rsiw2 and rsiw3 (cm_established moved on both)" \
		test "$(counter rsiw2 cm_established)" -gt "$e0" -a "$(counter rsiw3 cm_established)" -gt "$e1"
done

# --- librdmacm's rsockets (a socket API over RDMA Sends on iWARP):
# rstream and riostream, 1 000 transfers of 4 KiB, each verified (-T v),
# and rcopy, a 4 MiB file copied and compared ---
for t in rstream riostream; do
	wait_for $((30 * TF)) not_listening 7471 bA
	ina timeout 120 $t -b 10.95.0.1 -T v -S 4096 -C 1000 >"$OUT/$t-server.txt" 2>&1 &
	server=$!
	wait_for $((30 * TF)) listening 7471 bA
	check "$t -T v: 1000 transfers of 4 KiB over rsockets, verified" \
		to "$OUT/$t-client.txt" inb timeout 120 $t -s 10.95.0.1 -T v -S 4096 -C 1000
	wait $server
	expect_eq "$t: the server exits 0" 0 $?
	echo "# $t: $(awk '$1 == "custom" { print $8 " us per transfer" }' "$OUT/$t-client.txt")"
done
# (The files in the guest's tmpfs: rcopy's server maps its destination,
# which the 9p share of $OUT does not allow.)
rc_dir=$(mktemp -d)
head -c 4194304 /dev/urandom >"$rc_dir/src"
ina timeout 120 rcopy >"$OUT/rcopy-server.txt" 2>&1 &
server=$!
wait_for $((30 * TF)) listening 7427 bA
check "rcopy: a 4 MiB file over rsockets" \
	to "$OUT/rcopy-client.txt" inb timeout 120 rcopy "$rc_dir/src" "10.95.0.1:$rc_dir/dst"
check "rcopy: the copy is the file" cmp "$rc_dir/src" "$rc_dir/dst"
kill $server 2>/dev/null
wait $server 2>/dev/null
rm -rf "$rc_dir"

# --- Open MPI (Debian 12's 4.1) over libfabric's RDM endpoint on rsiw:
# its OFI MTL (pml cm) with only verbs;ofi_rxm allowed, so it cannot fall
# back to its TCP or shared-memory transports; two ranks in namespace bA,
# both on rsiw2 (their connections loop back through it), every payload
# checked (bench/mpi-pingpong.py, through mpi4py) ---
for run in "1000 64" "100 65536"; do
	read -r n size <<<"$run"
	e0=$(counter rsiw2 cm_established)
	check "mpirun -np 2, OFI MTL over verbs;ofi_rxm on rsiw2: $n round trips of $size octets" \
		to "$OUT/mpi-$size.txt" mpi_pingpong bA $n $size
	expect_eq "mpi-pingpong, $size octets: both ranks done, no payload wrong" 2 \
		"$(grep -c "round trips of $size octets, 0 bad" "$OUT/mpi-$size.txt")"
	echo "# mpi-pingpong $size B: $(sed -n 's/.*0 bad, //p' "$OUT/mpi-$size.txt" | head -1)"
	check "mpi-pingpong, $size octets: over rsiw2 (its cm_established moved)" test "$(counter rsiw2 cm_established)" -gt "$e0"
done
# --- a bulk stream from a process's doorbells to an event-driven
# receiver in another namespace (rsiw-qpbench -m send: 4 Sends of 64 KiB in flight; the server
# sleeps on its completion channel): rsiw2 hands bulk to its QP's RX
# work, for the CPU the server leaves free, rather than reading it in the
# softirq of the client's system call. How much depends on how soon that
# CPU takes the work (a run of late starts sends the QP back to the
# softirq for 50 ms): printed, and the share must not be nothing ---
w0=$(counter rsiw2 rx_work_octets)
qpb=$RSIW_ROOT/bench/qpbench/rsiw-qpbench
wait_for $((30 * TF)) not_listening 18520 bA
ina timeout 60 $qpb server -a 10.95.0.1 -p 18520 -n 1 -m send >"$OUT/qpbench-server.txt" 2>&1 &
server=$!
wait_for $((30 * TF)) listening 18520 bA
check "rsiw-qpbench -m send -d 4: 64 KiB Sends for 2 s" \
	to "$OUT/qpbench-client.txt" inb timeout 60 $qpb client -a 10.95.0.1 -b 10.95.0.2 -p 18520 -n 1 -m send -d 4 -t 2
wait $server
expect_eq "rsiw-qpbench server exits 0" 0 $?
sent=$(awk '$1 == "qp" && $3 == "bytes" { print $4 }' "$OUT/qpbench-client.txt")
w1=$(counter rsiw2 rx_work_octets)
echo "# rsiw-qpbench send: $(grep -E '^(aggregate_mbps|cpu_busy_each)' "$OUT/qpbench-client.txt" | tr '\n' ' '); $((w1 - w0)) of ${sent:-0} octets in rsiw2's RX work"
check "rsiw-qpbench send: some of the stream went through rsiw2's RX work (rx_work_octets grew)" \
	test "${sent:-0}" -gt 0 -a $((w1 - w0)) -gt 0

check "rdma link delete rsiw2" rdma link delete rsiw2
check "rdma link delete rsiw3" rdma link delete rsiw3
check "rmmod rsiw" rmmod rsiw
dmesg > "$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses, leaks or user-space crashes (but qperf's, read above)" \
	'qperf\[[0-9]+\]: segfault at 0 ip [0-9a-f]+ sp [0-9a-f]+ error 4 in libibverbs'

finish
