#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Observability: rsiw's trace events (tracefs events/rsiw/), the per-QP
# attributes of `rdma resource show qp -dd` and the port counters of
# `rdma statistic show link`, driven by unchanged rdma-core programs over
# two rsiw devices on the ends of a veth pair (as userspace.sh):
#   rping with data       CM states, MPA accepted, QP states, QP bytes
#   rping to a closed port   a connection failure (TCP refused)
#   rping to a mute peer     a connection timeout (no MPA Reply in 10 s)
#   a rejecting listener     an MPA reject sent and received (ucmatose)
#   ucmatose -S 64 vs 1024   Sends larger than the receives: Terminates,
#                            WRs completed in error
set -u
. "$(dirname "$0")/../common/lib.sh"

export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"
# Bounds: a listener is up within a second and each program below ends
# within seconds on the lean kernel (rping's 2000 rounds in about 30 s);
# the timeouts of 60-300 s only keep a hang from taking the guest's whole
# limit, and the waits scale with TF on the debug kernel.
a=10.98.0.1
b=10.98.0.2
local_veth rsiwo0 $a rsiwo1 $b


# snapshot: every counter of both devices into the array named by $1.
declare -A before after
snapshot() {
	local -n s=$1
	local d n
	for d in rsiw0 rsiw1; do
		for n in cm_established cm_timeouts cm_failures mpa_reject_sent mpa_reject_received \
			terminate_sent terminate_received rx_crc_errors rx_protocol_errors; do
			# shellcheck disable=SC2034 # a nameref: fills the caller's array
			s[$d.$n]=$(counter $d $n)
		done
	done
}

# expect_delta DEV NAME N: the counter moved by N between the snapshots.
expect_delta() {
	expect_eq "$1 $2 +$3" "$3" $((${after[$1.$2]:-0} - ${before[$1.$2]:-0}))
}

# expect_delta_min DEV NAME N: moved by N or more.
expect_delta_min() {
	local d=$((${after[$1.$2]:-0} - ${before[$1.$2]:-0}))
	if [ "$d" -ge "$3" ]; then pass "$1 $2 +$d (at least $3)"; else fail "$1 $2 +$d (expected at least $3)"; fi
}

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add rsiw0 on rsiwo0" rdma link add rsiw0 type rsiw netdev rsiwo0
setup "rdma link add rsiw1 on rsiwo1" rdma link add rsiw1 type rsiw netdev rsiwo1

# --- tracefs: the events exist and record ---
# (Each event's content is checked below; that they exist is only what
# enabling them needs.)
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T
setup "tracefs has events/rsiw/{rsiw_cm_state,rsiw_mpa,rsiw_qp_state,rsiw_terminate_sent,rsiw_terminate_received,rsiw_wr_error}" \
	bash -c "for e in rsiw_cm_state rsiw_mpa rsiw_qp_state rsiw_terminate_sent rsiw_terminate_received rsiw_wr_error; do test -f $T/events/rsiw/\$e/format || exit 1; done"
echo 0 >$T/tracing_on
echo >$T/trace
echo 1 >$T/events/rsiw/enable
echo 1 >$T/tracing_on

# --- the counters the deltas below read exist (a missing one would read
# as 0, and a delta of +0 pass) ---
rdma statistic show link rsiw0/1 >"$OUT/statistic-start.txt"
cnames="mpa_reject_sent mpa_reject_received cm_timeouts cm_failures cm_established rx_crc_errors rx_protocol_errors"
check "rdma statistic show link rsiw0/1 has $cnames" \
	bash -c "for n in $cnames; do grep -qw \$n '$OUT/statistic-start.txt' || exit 1; done"

# --- rping with data: per-QP attributes while it runs ---
snapshot before
timeout 300 rping -s -a $a -C 2000 -S 4096 >"$OUT/rping-server.txt" 2>&1 &
server=$!
wait_for $((30 * TF)) listening 7174
timeout 300 rping -c -a $a -I $b -C 2000 -S 4096 -V >"$OUT/rping-client.txt" 2>&1 &
client=$!
# A QP of each end shows its stream's bytes and messages while it runs
# (iproute2 prints the driver's attributes with a drv_ prefix).
qp_busy() {
	rdma resource show qp -dd >"$OUT/res-qp.txt" 2>&1 &&
		[ "$(grep -cE 'comm rping .*drv_tx_bytes [1-9][0-9]* drv_rx_bytes [1-9]' "$OUT/res-qp.txt")" -ge 2 ]
}
check "rdma resource show qp -dd: both QPs with bytes sent and received" wait_for $((60 * TF)) qp_busy
sed 's/^/# /' "$OUT/res-qp.txt" | head -20
rpingqp() { grep -E 'comm rping ' "$OUT/res-qp.txt"; }
expect_eq "per-QP: both in drv_qp_state RTS" 2 "$(rpingqp | grep -c 'drv_qp_state RTS ')"
expect_eq "per-QP: both sent and received messages" 2 \
	"$(rpingqp | grep -cE 'drv_tx_msgs [1-9][0-9]* drv_rx_msgs [1-9]')"
expect_eq "per-QP: zero-copy, error, Terminate and retransmit counts" 2 \
	"$(rpingqp | grep -cE 'drv_tx_zcopy_bytes [0-9]+ drv_wr_errors 0 drv_terminate_sent 0 drv_terminate_received 0 drv_tcp_retrans [0-9]+')"
check "rping client: data verified to the end" wait $client
wait $server
expect_eq "rping server exit status" 0 $?
snapshot after
expect_delta rsiw0 cm_established 1
expect_delta rsiw1 cm_established 1
expect_delta rsiw1 cm_failures 0
expect_delta rsiw1 cm_timeouts 0

# --- a port with no listener: the connection fails (TCP refused) ---
snapshot before
timeout 60 rping -c -a $a -I $b -p 7998 -C 1 >"$OUT/rping-refused.txt" 2>&1
expect_eq "rping to a closed port fails" 1 $(($? != 0))
snapshot after
expect_delta rsiw1 cm_failures 1
expect_delta rsiw1 cm_established 0

# --- a peer that accepts TCP but never answers MPA: a timeout ---
snapshot before
perl -MIO::Socket::INET -e '
	my $l = IO::Socket::INET->new(LocalAddr => "'$a'", LocalPort => 7997, Listen => 1, ReuseAddr => 1) or die;
	my $c = $l->accept; sleep 20;' &
mute=$!
wait_for $((30 * TF)) listening 7997
timeout 60 rping -c -a $a -I $b -p 7997 -C 1 >"$OUT/rping-mute.txt" 2>&1
expect_eq "rping to a peer that never answers fails" 1 $(($? != 0))
kill $mute 2>/dev/null
wait $mute 2>/dev/null
snapshot after
expect_delta rsiw1 cm_timeouts 1
expect_delta rsiw1 cm_failures 0

# --- a server that rejects: an MPA reject sent and received ---
# (A pyverbs listener that rejects the first request it gets. ucmatose
# -c 1 against -c 2 rejected the second request only when it came before
# the first connection's ESTABLISHED event: on a loaded machine it did
# not, and nothing was rejected.)
snapshot before
timeout 120 python3 -c '
import sys
from pyverbs.cmid import CMID, AddrInfo
import pyverbs.cm_enums as ce
ai = AddrInfo(src=sys.argv[1], src_service=sys.argv[2], port_space=ce.RDMA_PS_TCP, flags=ce.RAI_PASSIVE)
lid = CMID(creator=ai)
lid.listen()
req = lid.get_request()
req.reject()
print("rejected a connection request", flush=True)
req.close()
lid.close()
' $a 7996 >"$OUT/reject-server.txt" 2>&1 &
server=$!
wait_for $((30 * TF)) listening 7996
timeout 120 ucmatose -s $a -b $b -p 7996 -c 1 -C 10 >"$OUT/ucmatose-reject-client.txt" 2>&1
expect_eq "ucmatose to a rejecting server fails" 1 $(($? != 0))
wait $server
expect_eq "rejecting server exit status" 0 $?
check "rejecting server: rejected a connection request" grep -q 'rejected a connection request' "$OUT/reject-server.txt"
check "ucmatose client: the connection was rejected" grep -q 'RDMA_CM_EVENT_REJECTED' "$OUT/ucmatose-reject-client.txt"
snapshot after
expect_delta rsiw0 mpa_reject_sent 1
expect_delta rsiw1 mpa_reject_received 1

# --- ucmatose: Sends of 1024 octets into receives of 64: Terminates ---
snapshot before
timeout 120 ucmatose -b $a -p 7995 -c 1 -C 4 -S 64 >"$OUT/ucmatose-term-server.txt" 2>&1 &
server=$!
wait_for $((30 * TF)) listening 7995
timeout 120 ucmatose -s $a -b $b -p 7995 -c 1 -C 4 -S 1024 >"$OUT/ucmatose-term-client.txt" 2>&1
wait $server 2>/dev/null
snapshot after
expect_delta_min rsiw0 terminate_sent 1
expect_delta_min rsiw1 terminate_received 1
expect_delta_min rsiw0 rx_protocol_errors 1

# --- the trace: one of each event, with sensible fields ---
echo 0 >$T/tracing_on
cp $T/trace "$OUT/trace.txt"
echo 0 >$T/events/rsiw/enable
grep -m3 rsiw_ "$OUT/trace.txt" | sed 's/^/# /'
has() { grep -qE "$1" "$OUT/trace.txt"; }
check "trace: rsiw_cm_state of the rping server's endpoint" \
	has "rsiw_cm_state: cm_id=[0-9]+ local=$a:7174 remote=$b:[0-9]+ - -> await_request"
check "trace: rsiw_cm_state to await_accept" has 'rsiw_cm_state: .* await_request -> await_accept'
check "trace: rsiw_cm_state of the rping client's endpoint" \
	has "rsiw_cm_state: cm_id=[0-9]+ local=$b:[0-9]+ remote=$a:7174 connecting -> await_reply"
check "trace: rsiw_mpa accepted, rev 2 with IRD/ORD and an RTR" \
	has 'rsiw_mpa: cm_id=[0-9]+ initiator accepted rev=2 crc=[01] markers_tx=0 markers_rx=0 ird=[0-9]+ ord=[0-9]+ rtr=[a-z_]+'
check "trace: rsiw_mpa reject_sent" has 'rsiw_mpa: cm_id=[0-9]+ responder reject_sent'
check "trace: rsiw_mpa rejected" has 'rsiw_mpa: cm_id=[0-9]+ initiator rejected'
check "trace: rsiw_mpa failed (the mute peer)" has 'rsiw_mpa: cm_id=[0-9]+ initiator failed'
check "trace: rsiw_qp_state INIT -> RTS" has 'rsiw_qp_state: qpn=[0-9]+ INIT -> RTS'
check "trace: rsiw_qp_state -> ERR" has 'rsiw_qp_state: qpn=[0-9]+ [A-Z]+ -> ERR'
check "trace: rsiw_terminate_sent with layer, type, code" \
	has 'rsiw_terminate_sent: qpn=[0-9]+ layer=(RDMAP|DDP|MPA) type=0x[0-9a-f] code=0x[0-9a-f]{2}'
check "trace: rsiw_terminate_received with layer, type, code" \
	has 'rsiw_terminate_received: qpn=[0-9]+ layer=(RDMAP|DDP|MPA) type=0x[0-9a-f] code=0x[0-9a-f]{2}'
check "trace: rsiw_wr_error with wr_id, opcode, status" \
	has 'rsiw_wr_error: qpn=[0-9]+ wr_id=0x[0-9a-f]+ opcode=[A-Z_]+ status=[A-Z_]+'
for e in terminate_sent terminate_received; do
	grep -m1 "rsiw_$e" "$OUT/trace.txt" | sed 's/^/# /'
done

rdma statistic show link rsiw0/1 | sed 's/^/# /'
rdma statistic show link rsiw1/1 | sed 's/^/# /'
check "rdma link delete rsiw0" rdma link delete rsiw0
check "rdma link delete rsiw1" rdma link delete rsiw1
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
