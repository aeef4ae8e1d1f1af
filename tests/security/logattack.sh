#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Logs under attack: a hostile peer (tests/progs/
# fpdu-attack.py, plain TCP from namespace n2) opens COUNT connections to
# an rdma_cm listener on rsiw0 (rsiw-storm server, namespace n1), each
# completing MPA and then sending one malformed FPDU, half with a bad DDP
# version, half with a wrong CRC. Checks: every one accepted and answered
# (a Terminate) and closed; rsiw's counters count each exactly once
# (rx_protocol_errors, rx_crc_errors, terminate_sent); the kernel log
# grows at the ratelimit's pace, not with the number of bad FPDUs; the
# server survives; dmesg clean.
#
#   logattack.sh [COUNT]   (default 10 000; 100 000 is the long form)
set -u
. "$(dirname "$0")/../common/lib.sh"
. "$(dirname "$0")/../common/stress-lib.sh"

count=${1:-10000}
port=7500

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "namespaces n1 and n2" stress_namespaces
setup "veth rsp1 (n1) <-> rsp2 (n2)" veth_pair rsp1 rsp2 10.97.1
setup "rdma link add rsiw0 on rsp1" in1 rdma link add rsiw0 type rsiw netdev rsp1
check "rsiw0 port ACTIVE" wait_for 10 port_active rsiw0
check "server listens" start_server n1 10.97.1.1 $port "$OUT/logattack-server.txt"

lines0=$(dmesg | wc -l)
t0=$(date +%s)
in2 timeout 1200 python3 "$RSIW_ROOT/tests/peers/fpdu-attack.py" 10.97.1.1 $port "$count" 8 \
	>"$OUT/logattack.txt" 2>&1
rc=$?
t1=$(date +%s)
cat "$OUT/logattack.txt" | sed 's/^\([^#]\)/# \1/'
echo "# $count malformed FPDUs in $((t1 - t0)) s"
expect_eq "every connection accepted, then closed by rsiw" 0 $rc
half=$((count / 2))
check "every connection completed MPA and sent its FPDU" \
	grep -q "^attack: $count connections, $count accepted ($((count - half)) protocol, $half CRC)" "$OUT/logattack.txt"
# rsiw sends its Terminate and closes; when the close is a reset (the
# rest of the peer's data unread) the peer may lose the Terminate before
# reading it, so the peer's count is a lower bound (terminate_sent below
# is exact).
answered=$(sed -n 's/.* \([0-9]*\) answered before close.*/\1/p' "$OUT/logattack.txt")
check "the peer read a Terminate on at least 99% of the connections (${answered:-0})" \
	[ "${answered:-0}" -ge $((count * 99 / 100)) ]
lines1=$(dmesg | wc -l)
secs=$((t1 - t0 + 1))
echo "# kernel log: $((lines1 - lines0)) lines during the attack ($count FPDUs, $secs s)"
dmesg | tail -n +$((lines0 + 1)) | sed 's/^\[[ 0-9.]*\] //; s/qp [0-9]*/qp N/; s/(.*)/(...)/' | sort | uniq -c | sort -rn | head -5 | sed 's/^/#   /'
# rsiw's messages share one ratelimit (the kernel default: a burst of 10
# per 5 s), so the log grows with time, not with what the peer sends:
# at most 10 + 2 lines a second, with a margin.
check "the kernel log stays rate-limited: $((lines1 - lines0)) lines in $secs s for $count bad FPDUs" \
	[ $((lines1 - lines0)) -le $((20 + 3 * secs)) ]
rdma statistic show link rsiw0/1 | sed 's/^/# /'
expect_eq "rx_protocol_errors counts each bad DDP version once" $((count - half)) "$(counter rsiw0 rx_protocol_errors)"
expect_eq "rx_crc_errors counts each bad CRC once" $half "$(counter rsiw0 rx_crc_errors)"
expect_eq "terminate_sent: one per connection" $count "$(counter rsiw0 terminate_sent)"
stop_server_rc() {
	kill -TERM "$server"
	wait_for 60 bash -c "! kill -0 $server 2>/dev/null"
}
check "the server is still up after the attack" kill -0 "$server"
check "the server ends on SIGTERM" stop_server_rc
grep '^server:' "$OUT/logattack-server.txt" | sed 's/^/# /'
check "no RDMA object left" wait_for 30 bash -c '! rdma resource show | grep -qE "(qp|cq|pd|mr|cm_id|ctx) [1-9]"'
check "rdma link delete rsiw0" rdma link delete rsiw0
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
